"""Salient Poses start-up, module-local: Maya runs the userSetup.py of every module's scripts
folder at start-up (the user's own userSetup.py is not touched)."""

try:
    from maya_plugin import startup
except ImportError as exc:  # the module's PYTHONPATH lines did not take effect
    print("Salient Poses is not available:", exc)
else:
    startup.install()
