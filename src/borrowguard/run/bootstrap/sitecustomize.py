"""borrowguard run bootstrap: `borrowguard run` puts this directory on the child's PYTHONPATH only.

Python imports `sitecustomize` at start-up, so every Python process the command starts (multiprocessing
spawn/forkserver children, uvicorn/gunicorn workers) runs this file. It runs the sitecustomize this one
shadows, if any, then arms the guard (installed when the process imports transformers). It never raises.
"""

import os
import sys


def _chain_original() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _import_hook():
    try:
        from borrowguard.run import hook
    except ImportError:
        # The child's environment lacks borrowguard: load ours by path, without putting its
        # site-packages (and its transformers) on the child's sys.path.
        import importlib.util

        package_dir = os.environ.get("BORROWGUARD_PACKAGE_DIR", "")
        init = os.path.join(package_dir, "__init__.py")
        if not package_dir or not os.path.isfile(init):
            raise
        for name in [m for m in sys.modules if m == "borrowguard" or m.startswith("borrowguard.")]:
            del sys.modules[name]
        spec = importlib.util.spec_from_file_location(
            "borrowguard", init, submodule_search_locations=[package_dir]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["borrowguard"] = module
        spec.loader.exec_module(module)
        from borrowguard.run import hook
    return hook


def _main() -> None:
    try:
        _chain_original()
    except Exception as exc:
        _warn(f"the original sitecustomize failed: {type(exc).__name__}: {exc}")
    try:
        _import_hook().arm()  # arm() honours BORROWGUARD_DISABLE
    except Exception as exc:
        _warn(f"guard not armed in pid {os.getpid()}: {type(exc).__name__}: {exc}")


def _warn(message: str) -> None:
    try:
        sys.stderr.write(f"borrowguard: warning: {message}\n")
    except Exception:
        pass


_main()
