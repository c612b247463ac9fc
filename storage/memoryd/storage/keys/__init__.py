"""Keys and envelope encryption: tenant keys from the master key, and per-subject data keys whose
destruction is crypto-shredding.
"""

from ._envelope import DataKey, SubjectKeys, TenantKeys, WRAPPED_KEY_COLUMN, open_row
from ._keys import LocalKeyProvider, load_or_create_master_key

__all__ = ["DataKey", "LocalKeyProvider", "SubjectKeys", "TenantKeys", "WRAPPED_KEY_COLUMN",
           "load_or_create_master_key", "open_row"]
