"""Options for tests of mechanics that do not depend on how K is chosen.

The schema's default chooses K by the tolerance (a search over K with fits and corrective
keys); tests of previews, layers, undo and host calls choose it by the threshold rule instead,
as the product did before the tolerance became the default, so they stay fast and their
layers are the pose-key layer and the residual only.
"""

from sp_core.options import Options

#: K by the threshold rule (``--tolerance ""``): no search, no corrective layer.
SUGGESTED = Options().replace(tolerance=None)
