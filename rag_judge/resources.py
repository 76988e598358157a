"""Files that ship with rag-judge (configs/, prompts/), found in a wheel or a source checkout."""

from __future__ import annotations

from pathlib import Path

__all__ = ["resolve_config", "resource_dir"]


def resource_dir(name: str) -> Path:
    """The packaged ``configs`` or ``prompts`` folder: inside the wheel, else the checkout's."""
    packaged = Path(__file__).parent / "_resources" / name
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / name


def resolve_config(path: str | Path) -> Path:
    """A config path as given, or else the shipped one of that name (``configs/demo.yaml``).

    So ``rag-judge run configs/demo.yaml`` works from any folder after a plain pip install.
    """
    given = Path(path)
    if given.exists():
        return given
    shipped = resource_dir("configs") / (given.name if given.parent.name == "configs" else given)
    return shipped if shipped.exists() else given
