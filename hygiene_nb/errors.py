"""Every error hygiene-nb raises, with a stable kebab-case ``code``, an exit code and a next step.

::

    HygieneError                      code internal-error       exit 1
    ├── UsageError                    code bad-usage            exit 2
    │   ├── RootInvalid               code root-invalid         exit 2
    │   ├── RootChanged               code root-changed         exit 2
    │   ├── PathNotNormal             code path-not-normal      exit 2
    │   ├── AmbiguousName             code ambiguous-name       exit 2
    │   ├── ExcludeInvalid            code exclude-invalid      exit 2
    │   ├── RuleInvalid               code rule-invalid         exit 2
    │   ├── ConfigInvalid             code config-invalid       exit 2
    │   ├── PlanMalformed             code plan-malformed       exit 2
    │   ├── PlanUnreadable            code plan-unreadable      exit 2
    │   ├── SnapshotOutdated          code snapshot-outdated    exit 2
    │   ├── HostInvalid               code host-invalid         exit 2
    │   ├── NotAFleet                 code not-a-fleet-dataset  exit 2
    │   ├── DestInsideStore           code dest-inside-store    exit 2
    │   ├── PublishedDifferently      code published-differently exit 2
    │   └── BatchNotFound (LookupError) code batch-not-found    exit 2
    ├── StoreError                    code store-unusable       exit 1
    │   ├── IndexCorrupt              code store-index-corrupt  exit 1
    │   ├── StoreFull                 code store-full           exit 1
    │   ├── LedgerTooNew              code ledger-too-new       exit 1
    │   ├── RecordsIncomplete         code records-incomplete   exit 1
    │   ├── SnapshotTooNew            code snapshot-too-new     exit 1
    │   ├── FleetTooNew               code fleet-too-new        exit 1
    │   └── FleetUnusable             code fleet-unusable       exit 1
    ├── SnapshotNotFound (LookupError) code snapshot-not-found  exit 2
    ├── ReportFailed                  code report-failed        exit 1
    ├── QueryMemoryExceeded           code query-memory-exceeded exit 1
    └── Refused                       code refused              exit 3
        ├── PlanUntrusted             code plan-untrusted       exit 3
        ├── PlanDigestMismatch        code plan-digest-mismatch exit 3
        ├── PlanNotIssued             code plan-not-issued      exit 3
        ├── PlanExpired               code plan-expired         exit 3
        ├── PlanAlreadyExecuted       code plan-already-executed exit 3
        ├── ConfirmationMismatch      code confirmation-mismatch exit 3
        ├── AcknowledgementMissing    code acknowledgement-missing exit 3
        ├── RootReplaced              code root-replaced        exit 3
        ├── BaselineFailed            code baseline-failed      exit 3
        ├── CandidateForbidden        code candidate-forbidden  exit 3
        ├── ReceiptTampered           code receipt-tampered     exit 3
        ├── BatchInvalid              code batch-invalid        exit 3
        ├── BatchIncomplete           code batch-incomplete     exit 3
        ├── BatchContainsMount        code batch-contains-mount exit 3
        ├── BatchChanged              code batch-changed        exit 3
        ├── BatchBusy                 code batch-busy           exit 3
        └── FleetReadOnly             code fleet-is-read-only   exit 3

A message names the object it is about and ends with what to do next.
"""

from __future__ import annotations

__all__ = [
    "AcknowledgementMissing",
    "AmbiguousName",
    "BaselineFailed",
    "BatchBusy",
    "BatchChanged",
    "BatchContainsMount",
    "BatchIncomplete",
    "BatchInvalid",
    "BatchNotFound",
    "CandidateForbidden",
    "ConfigInvalid",
    "ConfirmationMismatch",
    "DestInsideStore",
    "ExcludeInvalid",
    "FleetReadOnly",
    "FleetTooNew",
    "FleetUnusable",
    "HostInvalid",
    "HygieneError",
    "IndexCorrupt",
    "LedgerTooNew",
    "NotAFleet",
    "PathNotNormal",
    "PlanAlreadyExecuted",
    "PlanDigestMismatch",
    "PlanExpired",
    "PlanMalformed",
    "PlanNotIssued",
    "PlanUnreadable",
    "PlanUntrusted",
    "PublishedDifferently",
    "QueryMemoryExceeded",
    "ReceiptTampered",
    "Refused",
    "ReportFailed",
    "RootChanged",
    "RootInvalid",
    "RootReplaced",
    "RuleInvalid",
    "SnapshotNotFound",
    "SnapshotOutdated",
    "SnapshotTooNew",
    "StoreError",
    "StoreFull",
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


class PathNotNormal(UsageError):
    """Raised when a path has a ``.`` or ``..`` component (never resolved as text)."""

    code = "path-not-normal"


class AmbiguousName(UsageError):
    """Raised when a display text stands for two entries; only the exact bytes say which.

    A name that is not valid UTF-8 displays with escapes, like its typed-out look-alike.
    """

    code = "ambiguous-name"


class ExcludeInvalid(UsageError):
    """Raised when an exclude pattern or a line of ``.hygieneignore`` cannot be used."""

    code = "exclude-invalid"


class RuleInvalid(UsageError):
    """Raised when a user rules file is malformed (the message names the line)."""

    code = "rule-invalid"


class StoreError(HygieneError):
    """Raised when the store cannot be created, read or written."""

    code = "store-unusable"


class RecordsIncomplete(StoreError):
    """Items moved, but the run's records (receipt, ledger, log) could not all be written."""

    code = "records-incomplete"


class IndexCorrupt(StoreError):
    """Raised when the store's snapshot index cannot be parsed."""

    code = "store-index-corrupt"


class StoreFull(StoreError):
    """Raised when the disk holding the store has no space left for a write the store needs."""

    code = "store-full"


class QueryMemoryExceeded(HygieneError):
    """Raised when a query over snapshots needs more working memory than it may use."""

    code = "query-memory-exceeded"


class SnapshotNotFound(HygieneError, LookupError):
    """Raised when no snapshot matches the root or id asked for."""

    code = "snapshot-not-found"
    exit_code = 2


class LedgerTooNew(StoreError):
    """Raised when the ledger was written by a newer hygiene-nb (it is left unchanged)."""

    code = "ledger-too-new"


class SnapshotOutdated(UsageError):
    """Raised when a plan is asked of a snapshot in a format that lacks what plans check."""

    code = "snapshot-outdated"


class SnapshotTooNew(StoreError):
    """Raised when a snapshot's format is newer than this hygiene-nb reads (it is left as is)."""

    code = "snapshot-too-new"


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


class PlanNotIssued(Refused):
    """Raised when a plan was not issued by this store (or the store has no record of it)."""

    code = "plan-not-issued"


class PlanExpired(Refused):
    """Raised when a plan's validity window has passed."""

    code = "plan-expired"


class PlanAlreadyExecuted(Refused):
    """Raised when a plan was executed already, or is being executed now (single use)."""

    code = "plan-already-executed"


class ConfirmationMismatch(Refused):
    """Raised when the confirmed plan or batch id is missing or differs from the one acted on."""

    code = "confirmation-mismatch"


class AcknowledgementMissing(Refused):
    """Raised when the required --acknowledge-risk value is missing or wrong."""

    code = "acknowledgement-missing"


class RootReplaced(Refused):
    """Raised when a plan's root is no longer the directory it was made for (device, inode)."""

    code = "root-replaced"


class CandidateForbidden(Refused):
    """Raised when a plan names a path a correct planner never emits (/, home, the store…)."""

    code = "candidate-forbidden"


class ReceiptTampered(Refused):
    """Raised when a receipt's content does not match its own digest."""

    code = "receipt-tampered"


class BatchNotFound(UsageError, LookupError):
    """Raised when no quarantine batch has the id asked for (or the id is not a batch id)."""

    code = "batch-not-found"


class BatchInvalid(Refused):
    """Raised when a batch has no valid manifest, is not ours or holds something unknown."""

    code = "batch-invalid"


class BatchIncomplete(Refused):
    """Raised when purge would destroy a batch holding items its manifest does not record."""

    code = "batch-incomplete"


class BatchContainsMount(Refused):
    """Raised when purge finds another filesystem mounted inside a batch: nothing is destroyed."""

    code = "batch-contains-mount"


class BatchChanged(Refused):
    """Raised when purge would destroy items that changed after they were quarantined."""

    code = "batch-changed"


class BatchBusy(Refused):
    """Raised when another restore or purge is working on the same batch right now."""

    code = "batch-busy"


class ReportFailed(HygieneError):
    """Raised when a cell of the report notebook failed (the notebook and HTML show where)."""

    code = "report-failed"


class ConfigInvalid(UsageError):
    """Raised when the store's ``config.toml`` is unreadable, not TOML, or a setting is wrong."""

    code = "config-invalid"


class BaselineFailed(Refused):
    """Raised when the root's verify commands fail before execution: nothing moves."""

    code = "baseline-failed"


class HostInvalid(UsageError):
    """A host name a fleet dataset cannot hold (it names a partition: no ``/``, ``=``, spaces)."""

    code = "host-invalid"


class NotAFleet(UsageError):
    """A DEST that is not a fleet dataset (no marker at its top), nor empty to become one."""

    code = "not-a-fleet-dataset"


class DestInsideStore(UsageError):
    """A fleet DEST in a store or a quarantine: publishing there would make the store a fleet's."""

    code = "dest-inside-store"


class PublishedDifferently(UsageError):
    """A scan already in the fleet dataset, published otherwise (redacted or not, its depth)."""

    code = "published-differently"


class FleetTooNew(StoreError):
    """A fleet dataset (or one of its partitions) written by a newer hygiene-nb."""

    code = "fleet-too-new"


class FleetUnusable(StoreError):
    """A fleet dataset that cannot be read or written (permissions, the object store, damage)."""

    code = "fleet-unusable"


class FleetReadOnly(Refused):
    """A fleet dataset used as a store, planned or executed in: evidence, never authority."""

    code = "fleet-is-read-only"
