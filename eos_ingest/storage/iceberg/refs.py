"""The refs of an Iceberg table that a batch's write uses (storage/iceberg/branch.py): its
branches' names, cutting and removing them, and how a commit of ref changes that failed is told:
lost to a concurrent commit, of unknown outcome, or refused by the catalog (commit_outcomes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eos_ingest.errors import CatalogAccessError, PartialWriteError
from eos_ingest.storage import commit_outcomes
from eos_ingest.storage.table_format import Txn

MAIN = "main"
BRANCH_PREFIX = "eos_batch"


class PublishConflictError(RuntimeError):
    """main moved since the branch was cut (or a newer attempt published): nothing was published,
    the branch is removed; the caller stages anew from main as it is now."""


def branch_name(batch_id: int, txn: Txn | None) -> str:
    """The branch of one attempt's write: named for the batch and the fence (0 without a txn)."""
    return f"{BRANCH_PREFIX}{batch_id}_f{txn.fence if txn is not None else 0}"


def commit_refs(table: Any, what: str, change: Callable[[Any], Any]) -> None:
    """One commit of branch changes, change(table.manageSnapshots()), on the table as it is now.
    Why a lost one is a PublishConflictError: the change is built on the metadata it read, and
    Iceberg refuses it when another writer's commit (a publish, another attempt's branch) landed
    since ("Table metadata refresh is required") rather than applying it anew; the caller's try
    starts over from a fresh stage, as after a refused fast-forward. One whose outcome is unknown
    (commit_outcomes) is a PartialWriteError: main is not touched by a branch's change, but this
    try cannot go on, and the next attempt removes the branches of older fences. One the catalog
    refuses for good (a missing grant) is a CatalogAccessError naming the table."""
    table.refresh()
    name = table.name()
    try:
        change(table.manageSnapshots()).commit()
    except Exception as exc:
        raise_classified(exc, f"{what} of {name}")
        raise


def raise_classified(exc: BaseException, what: str, *, catalog_only: bool = False) -> None:
    """Raise PublishConflictError for a commit on a branch (or a branch change) that lost to a
    concurrent commit, PartialWriteError for one whose outcome is unknown, CatalogAccessError for
    one the catalog refused (nothing of it landed, main untouched); return otherwise.
    catalog_only: a Spark job ran under it (commit_outcomes.outcome)."""
    kind = commit_outcomes.outcome(exc, catalog_only=catalog_only)
    if kind == "refused":
        raise CatalogAccessError(
            f"{what} was refused by the catalog ({commit_outcomes.describe(exc)}); nothing of the "
            f"batch was published and it stays planned. Fix: {commit_outcomes.refusal_fix(exc)}; "
            "then run the batch again"
        ) from exc
    if kind == "lost":
        raise PublishConflictError(
            f"{what} lost to a concurrent commit: {commit_outcomes.describe(exc)}"
        ) from exc
    if kind == "unknown":
        raise PartialWriteError(
            f"{what}: the catalog's answer is lost or an error ({commit_outcomes.describe(exc)}); "
            "main does not hold this try's write and the batch stays planned: run it again"
        ) from exc


def cut_branch(table: Any, branch: str) -> None:
    """Cut `branch` at main's current snapshot, replacing this attempt's own from a try whose
    removal failed."""
    table.refresh()
    if table.refs().containsKey(branch):
        commit_refs(table, f"removing the branch {branch}", lambda refs: refs.removeBranch(branch))
    commit_refs(table, f"cutting the branch {branch}", lambda refs: refs.createBranch(branch))


def remove_branch(table: Any, branch: str | None) -> None:
    """Remove `branch` from `table` if it is there."""
    table.refresh()
    if branch is not None and table.refs().containsKey(branch):
        table.manageSnapshots().removeBranch(branch).commit()


def remove_stale_branches(table: Any, batch_id: int, fence: int) -> list[str]:
    """Remove the branches of `batch_id` staged by fences up to `fence` (a crashed attempt's, or
    this attempt's own from a try that could not remove it): a newer fence's branch is left alone."""
    prefix = f"{BRANCH_PREFIX}{batch_id}_f"
    stale = []
    table.refresh()
    for name in list(table.refs().keySet()):
        if name.startswith(prefix) and name[len(prefix) :].isdigit() and int(name[len(prefix) :]) <= fence:
            stale.append(str(name))
    if stale:

        def remove(refs: Any) -> Any:
            for name in stale:
                refs = refs.removeBranch(name)
            return refs

        commit_refs(table, f"removing the branches {stale}", remove)
    return stale
