"""Every error hygiene-nb raises, with a stable kebab-case ``code``, an exit code and a next step.

::

    HygieneError                      code internal-error       exit 1
    ├── UsageError                    code bad-usage            exit 2
    │   ├── RootInvalid               code root-invalid         exit 2
    │   ├── RootChanged               code root-changed         exit 2
    │   ├── ExcludeInvalid            code exclude-invalid      exit 2
    │   ├── RuleInvalid               code rule-invalid         exit 2
    │   ├── PlanMalformed             code plan-malformed       exit 2
    │   └── PlanUnreadable            code plan-unreadable      exit 2
    ├── StoreError                    code store-unusable       exit 1
    │   ├── IndexCorrupt              code store-index-corrupt  exit 1
    │   └── LedgerTooNew              code ledger-too-new       exit 1
    ├── SnapshotNotFound (LookupError) code snapshot-not-found  exit 2
    └── Refused                       code refused              exit 3
        ├── PlanUntrusted             code plan-untrusted       exit 3
        └── PlanDigestMismatch        code plan-digest-mismatch exit 3

A message names the object it is about and ends with what to do next.
"""

from __future__ import annotations

__all__ = [
    "ExcludeInvalid",
    "HygieneError",
    "IndexCorrupt",
    "LedgerTooNew",
    "PlanDigestMismatch",
    "PlanMalformed",
    "PlanUnreadable",
    "PlanUntrusted",
    "Refused",
    "RootChanged",
    "RootInvalid",
    "RuleInvalid",
    "SnapshotNotFound",
    "StoreError",
    "UsageError",
]


class HygieneError(Exception):
    """Base of every error hygiene-nb raises on purpose."""

    code = "internal-error"
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(HygieneError):
    """Raised when the command line or a library call asks for something invalid."""

    code = "bad-usage"
    exit_code = 2


class RootInvalid(UsageError):
    """Raised when a scan root is missing, not a directory, or a symlink."""

    code = "root-invalid"


class RootChanged(UsageError):
    """Raised when a root is not the directory that was scanned (another device or inode)."""

    code = "root-changed"


class ExcludeInvalid(UsageError):
    """Raised when an exclude pattern or a line of ``.hygieneignore`` cannot be used."""

    code = "exclude-invalid"


class RuleInvalid(UsageError):
    """Raised when a user rules file is malformed (the message names the line)."""

    code = "rule-invalid"


class StoreError(HygieneError):
    """Raised when the store cannot be created, read or written."""

    code = "store-unusable"


class IndexCorrupt(StoreError):
    """Raised when the store's snapshot index cannot be parsed."""

    code = "store-index-corrupt"


class SnapshotNotFound(HygieneError, LookupError):
    """Raised when no snapshot matches the root or id asked for."""

    code = "snapshot-not-found"
    exit_code = 2


class LedgerTooNew(StoreError):
    """Raised when the ledger was written by a newer hygiene-nb (it is left unchanged)."""

    code = "ledger-too-new"


class PlanMalformed(UsageError):
    """Raised when a plan file is not exactly a ``hygiene-nb/plan@1`` document (names what)."""

    code = "plan-malformed"


class PlanUnreadable(UsageError):
    """Raised when a plan file cannot be opened or read (missing, no permission)."""

    code = "plan-unreadable"


class Refused(HygieneError):
    """Raised when a guard refuses a whole operation before anything is touched."""

    code = "refused"
    exit_code = 3


class PlanUntrusted(Refused):
    """Raised when a plan file is a symlink, not a regular file, not ours or writable by others."""

    code = "plan-untrusted"


class PlanDigestMismatch(Refused):
    """Raised when a plan's content does not match its ``plan_digest`` (it was edited)."""

    code = "plan-digest-mismatch"
