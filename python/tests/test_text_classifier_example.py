"""examples/python/text_classifier.py, run as a user runs it: it trains, the
best validation accuracy is high, the model it saved and loads back scores
the same, its logical GPU's peak is within the 1 GiB limit, and no op runs
on another device (the checkpoint's bytes go through the host and back:
the save and the load); a bad option is refused with its usage."""
import os
import re
import subprocess
import sys


def test_text_classifier_example():
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "python", "text_classifier.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDEV_SIM", "VDEV_VISIBLE"))}
    env["VDEV_SIM_GPUS"] = "1x16GiB"
    out = subprocess.run([sys.executable, script, "--epochs", "4"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    best = float(re.search(r"best epoch \d+: val_accuracy ([0-9.]+)", text).group(1))
    loaded = float(re.search(r"loaded best.keras: val_accuracy ([0-9.]+)", text).group(1))
    assert best >= 0.9 and loaded == best, text
    peak, limit = map(int, re.search(r"GPU:0: peak (\d+) bytes, limit (\d+) bytes", text).groups())
    assert 0 < peak <= limit == 1 << 30
    cpu = re.search(r"^/device:CPU:0 +(\d+) ", text, re.M)
    gpu = re.search(r"^/device:GPU:0 +(\d+) ", text, re.M)
    assert cpu and int(cpu.group(1)) == 0 and int(gpu.group(1)) > 0, text
    bad = subprocess.run([sys.executable, script, "--epochs", "x"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--epochs takes a whole number from 1 to 10000, not 'x'" \
        in bad.stderr
