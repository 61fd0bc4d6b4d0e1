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
    sys.exit(3)
time.sleep(float(sys.argv[2]))
if mode == "fail":
    write("failed", error={"type": "RuntimeError", "message": "CUDA out of memory"})
    sys.exit(1)
write("running", current_epoch=None)
time.sleep(float(sys.argv[3]))
write("completed", completed_epochs=2)
"""
