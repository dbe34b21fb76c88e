"""`python -m comfy_bisect ARGS`: runs the installed comfy-bisect binary with ARGS."""

import os
import subprocess
import sys

from comfy_bisect import find_bin


def main() -> int:
    binary = find_bin()
    args = [binary, *sys.argv[1:]]
    if sys.platform != "win32":
        os.execv(binary, args)  # replaces this process: signals and exit code are the binary's
    # Windows has no exec: run it and pass its exit code on. Ctrl-C reaches both processes
    # (same console); this one waits for the binary to finish its own clean stop.
    child = subprocess.Popen(args)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


if __name__ == "__main__":
    sys.exit(main())
