"""What the llama.cpp cross-checks share: running a command (a failure ends the test with its
stderr) and installing llama.cpp (node-llama-cpp at the version bench/llamacpp/compare.sh pins)
with the driver bench/llamacpp/llamacpp_bench.mjs beside it."""
import os
import shutil
import subprocess
import sys

SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    if proc.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def node_llama_cpp_version():
    with open(os.path.join(SOURCE, "bench", "llamacpp", "compare.sh")) as f:
        for line in f:
            if line.startswith("NODE_LLAMA_CPP="):
                return line.split("=", 1)[1].split()[0]
    sys.exit("FAIL: bench/llamacpp/compare.sh names no NODE_LLAMA_CPP version")


def install_llamacpp(npm_dir):
    """Installs node-llama-cpp into npm_dir (once) and returns the path of the driver script."""
    env = dict(os.environ, npm_config_ignore_scripts="true")
    run(["bash", os.path.join(SOURCE, "scripts", "npm-install.sh"), npm_dir,
         f"node-llama-cpp@{node_llama_cpp_version()}"], env=env)
    script = os.path.join(npm_dir, "llamacpp_bench.mjs")
    shutil.copy(os.path.join(SOURCE, "bench", "llamacpp", "llamacpp_bench.mjs"), script)
    return script
