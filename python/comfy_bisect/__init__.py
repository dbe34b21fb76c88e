"""comfy-bisect ships as a Rust binary inside this wheel; `find_bin()` says where it was installed."""

import os
import sys
import sysconfig


def find_bin() -> str:
    """The path of the installed `comfy-bisect` executable (the environment's scripts folder)."""
    name = "comfy-bisect" + (".exe" if sys.platform == "win32" else "")
    schemes = [sysconfig.get_default_scheme()] if hasattr(sysconfig, "get_default_scheme") else []
    # A `pip install --user` puts scripts under the user scheme, not the interpreter's.
    user_scheme = {"win32": "nt_user", "darwin": "osx_framework_user"}.get(sys.platform, "posix_user")
    folders = [sysconfig.get_path("scripts")]
    folders += [sysconfig.get_path("scripts", scheme) for scheme in schemes]
    if user_scheme in sysconfig.get_scheme_names():
        folders.append(sysconfig.get_path("scripts", user_scheme))
    folders.append(os.path.dirname(sys.executable))
    for folder in folders:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        f"{name} is not in this Python's scripts folders ({', '.join(dict.fromkeys(folders))}); "
        "reinstall it with `python -m pip install --force-reinstall comfy-bisect`"
    )
