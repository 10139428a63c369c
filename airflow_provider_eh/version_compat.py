"""The running Airflow's version, for the few names that moved between Airflow minors without a compat name.

Names that ``airflow.providers.common.compat`` carries (exceptions, ``conf``, ``mask_secret``) come from
there; the rest is chosen on these flags, as the official providers do in their own ``version_compat``.
"""

from __future__ import annotations


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    """``(major, minor, micro)`` of the installed Airflow, pre-release and local parts dropped."""
    from packaging.version import Version

    from airflow import __version__

    version = Version(__version__)
    return version.major, version.minor, version.micro


AIRFLOW_V_3_2_PLUS: bool = get_base_airflow_version_tuple() >= (3, 2, 0)

__all__ = ["AIRFLOW_V_3_2_PLUS", "get_base_airflow_version_tuple"]
