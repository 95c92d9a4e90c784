import random, sys, time
from ptxgen import Gemm, Schedule
from ptxgen.errors import ScheduleError, LoweringNotBuilt
from ptxgen.schedule.verify import verify
from tests import harness
rng = random.Random(int(sys.argv[1]))
t0 = time.time(); n = 0; skipped = 0
while time.time() - t0 < float(sys.argv[2]):
    dtype = rng.choice(["f16", "bf16", "tf32"]); es = 4 if dtype == "tf32" else 2; step = 16 // es
    pair = rng.random() < 0.5
    m = step * rng.randint(2, 90); nn = step * rng.randint(2, 40); k = step * rng.randint(2, 30)
    majors = ("row", "col") if dtype == "tf32" else (rng.choice(["row", "col"]), rng.choice(["row", "col"]))
    g = Gemm(m, nn, k, dtype=dtype, out_dtype=rng.choice(["f32", "f16", "bf16"]), a_layout=majors[0], b_layout=majors[1])
    bn = rng.choice([16, 32, 48, 64, 128, 256]); bk = rng.choice([32, 64]) // (es // 2)
    cluster = (2, 1) if pair else rng.choice([(2, 1), (1, 2), (2, 2), (1, 4), (4, 1)])
    size = cluster[0] * cluster[1]
    s = Schedule(block=(256 if pair else 128, bn, bk), instruction="tcgen05", stages=rng.randint(1, 4), sms=size * rng.randint(1, 3),
                 cta_group=2 if pair else 1, cluster=cluster, raster=rng.choice(["row", "grouped"]), group_m=4)
    try:
        verify(g, s, "sm_100a")
    except ScheduleError as e:
        skipped += 1; continue
    try:
        harness.check(g, s, "sm_100a", seed=n)
    except Exception as e:
        print("FAIL", g, s, type(e).__name__, str(e)[:400]); sys.stdout.flush()
    n += 1
print("ran", n, "skipped", skipped)
