"""Salient Poses start-up, module-local: Maya runs the userSetup.py of every module's scripts
folder at start-up (the user's own userSetup.py is not touched)."""

# Maya runs every module's userSetup.py in one chain: an exception here would stop the ones
# after it (the user's own), so nothing leaves this file
try:
    from maya_plugin import startup

    startup.install()
except ImportError as exc:  # the module's paths, or numpy/scipy not installed for mayapy
    print(f"Salient Poses is not available ({type(exc).__name__}: {exc}); run "
          "install.py --maya --mayapy PATH to install its Python packages for this Maya")
except Exception:  # noqa: BLE001 - anything else: said in full, the chain goes on
    import traceback

    print("Salient Poses failed to start:")
    traceback.print_exc()
