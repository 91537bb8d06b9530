"""The one C extension, next to pyproject.toml (which holds everything else).

``flight_server._gather``: rows of prepared Flight answers gathered through the Arrow C Data
Interface, no libarrow linked (flight_server/gather.py says why; docs/ARCHITECTURE.md,
Libraries). Built by ``pip install -e .`` (scripts/bootstrap.sh, which reinstalls when a C
source changes). Optional: without a compiler the install goes on without it and the Flight
server warns that it takes rows with pyarrow.compute instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "flight_server._gather",
            sources=["flight_server/_gather.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        )
    ]
)
