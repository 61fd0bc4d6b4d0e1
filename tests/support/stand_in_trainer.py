"""A stand-in for a training script, for launch tests that need no torch.

Uploaded by `launch --script` and run with the box's python: after a pause it
writes status.json as LibreYOLO does (atomically, with its own pid), runs a
while and completes; `crash` dies first printing hostile bytes; `fail` writes
a failed status. Arguments: MODE [SECONDS_BEFORE_STATUS [SECONDS_RUNNING]].
"""

TRAINER = r"""
import json, os, sys, time

def write(state, **more):
    run = os.environ["GPURENT_RUN_DIR"]
    os.makedirs(run, exist_ok=True)
    doc = dict(schema_version=1, state=state, pid=os.getpid(), total_epochs=2, **more)
    with open(os.path.join(run, "status.json.tmp"), "w") as f:
        json.dump(doc, f)
    os.replace(os.path.join(run, "status.json.tmp"), os.path.join(run, "status.json"))

mode = sys.argv[1]
print("stand-in trainer", sys.argv[1:], flush=True)
if mode == "crash":
    print("\x1b]52;c;aGk=\x07loading data\x1b[2J\r", flush=True)
    sys.stderr.write("FileNotFoundError: /data/missing.yaml not found\n")
    if sys.argv[2:]:  # as argparse says it: the arguments echoed back, secrets and all
        sys.stderr.write("train.py: error: unrecognized arguments: %s\n" % " ".join(sys.argv[2:]))
    sys.exit(3)
time.sleep(float(sys.argv[2]))
if mode == "fail":
    write("failed", error={"type": "RuntimeError", "message": "CUDA out of memory"})
    sys.exit(1)
write("running", current_epoch=None)
time.sleep(float(sys.argv[3]))
write("completed", completed_epochs=2)
"""

# A trainer that makes progress the way LibreYOLO shows it: one epoch every SECONDS,
# each a metrics.jsonl line, a new weights/last.pt (and best.pt) and status.json, then
# `completed`. Arguments: RUN_DIR EPOCHS SECONDS. SIGSTOP it and nothing moves, though
# its pid lives on: what a hung training loop looks like from outside.
EPOCH_TRAINER = r"""
import json, os, sys, time

run, epochs, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
os.makedirs(os.path.join(run, "weights"), exist_ok=True)
started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())

def status(state, epoch):
    doc = dict(schema_version=1, state=state, pid=os.getpid(), total_epochs=epochs,
               current_epoch=epoch, started_at=started,
               updated_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()))
    with open(os.path.join(run, "status.json.tmp"), "w") as f:
        json.dump(doc, f)
    os.replace(os.path.join(run, "status.json.tmp"), os.path.join(run, "status.json"))

def weights(name, epoch):
    path = os.path.join(run, "weights", name)
    with open(path + ".tmp", "wb") as f:
        f.write(os.urandom(4096) + b"epoch %d" % epoch)
    os.replace(path + ".tmp", path)

status("running", 0)
for epoch in range(1, epochs + 1):
    time.sleep(pause)
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write(json.dumps({"epoch": epoch, "train_loss": 10.0 / epoch}) + "\n")
    weights("last.pt", epoch)
    weights("best.pt", epoch)
    status("running", epoch)
status("completed", epochs)
"""
