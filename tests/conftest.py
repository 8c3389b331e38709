"""Suite-wide settings: property tests judge behaviour, never speed.

No deadline: a loaded 2-core machine must not fail a correct example. Under CI the examples are
derandomized, so a run is repeatable; on a developer's machine each run explores new ones.
"""

import os

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
