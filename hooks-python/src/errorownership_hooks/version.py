# SPDX-License-Identifier: Apache-2.0

# The package's version, stated here alone: pyproject.toml reads it
# ([tool.hatch.version]) and the package exports it as __version__.
__version__ = "0.1.0"
