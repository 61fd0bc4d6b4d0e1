/* A stand-in libnvidia-ml.so.1 for tests: the few NVML calls the probe makes, with
   NVML's own signatures, so the probe's ctypes path runs for real on a machine without
   a GPU. The driver keeps 71 utilisation samples 200 ms apart (14 s, as an H200 does);
   each count query (samples == NULL) moves its clock on FAKE_NVML_STEP_US (default 10 s).
   A sample is busy 99 % when its 200 ms slot is odd, else 0 %. FAKE_NVML_GPUS: how many
   GPUs (default 1); FAKE_NVML_FAIL=init makes nvmlInit_v2 fail. */
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned long long timeStamp; unsigned long long value; } nvmlSample_t;

static unsigned long long now_us = 100000000ULL;
static const unsigned long long step_us = 200000ULL;

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v ? atoi(v) : fallback;
}

int nvmlInit_v2(void) {
    const char *fail = getenv("FAKE_NVML_FAIL");
    return fail && strcmp(fail, "init") == 0 ? 9 : 0;
}

int nvmlDeviceGetCount_v2(unsigned int *count) { *count = env_int("FAKE_NVML_GPUS", 1); return 0; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
    *device = (void *)(unsigned long)(index + 1);
    return 0;
}

int nvmlDeviceGetSamples(void *device, int type, unsigned long long last_seen,
                         int *value_type, unsigned int *count, nvmlSample_t *samples) {
    unsigned long long oldest, ts;
    unsigned int n = 0;
    (void)device;
    if (type != 1) return 2;  /* NVML_ERROR_INVALID_ARGUMENT */
    if (samples == NULL) now_us += (unsigned long long)env_int("FAKE_NVML_STEP_US", 10000000);
    oldest = now_us - 70 * step_us;
    *value_type = 1;  /* unsigned int, in the union's low bytes */
    for (ts = oldest; ts <= now_us; ts += step_us) {
        if (ts <= last_seen) continue;
        if (samples != NULL) {
            if (n >= *count) break;
            samples[n].timeStamp = ts;
            samples[n].value = ((ts / step_us) % 2) ? 99 : 0;
        }
        n++;
    }
    if (n == 0) return 6;  /* NVML_ERROR_NOT_FOUND: nothing since last_seen */
    *count = n;
    return 0;
}
