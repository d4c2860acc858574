"""What every section of the config shares: the frozen base model, how a rule reports a problem
(`problem(fix)`), the checks used by several sections, values derived rather than read from the
file, and `replaced`, a copy whose changed values are checked."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Annotated, Any, TypeVar

from croniter import CroniterBadDateError, CroniterError, croniter
from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError

from eos_ingest.errors import ConfigError

SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly",
                    "@yearly")  # fmt: skip
_CRON_FIX = (
    "use a 5-field cron 'minute hour day-of-month month day-of-week' in UTC, e.g. '30 2 * * *' "
    f"(02:30 every day) or '*/15 * * * *', one of {', '.join(SCHEDULE_PRESETS)}, or null for manual runs"
)
_UNSET = object()


class Section(BaseModel):
    """A section of the config: frozen, and a key the file may not hold is a problem."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __setattr__(self, name: str, value: Any) -> None:
        # As a frozen dataclass does (callers catch AttributeError); a copy is `replaced`.
        raise AttributeError(f"{type(self).__name__} is frozen: make a copy with checks.replaced")

    def __hash__(self) -> int:
        # Pydantic's frozen hash fails on the dict fields (kafka settings, expectations).
        return hash((type(self), *map(_hashable, self.__dict__.values())))

    @classmethod
    def file_keys(cls) -> list[str]:
        """The keys the file may give this section (derived values are not among them)."""
        return [f.alias or n for n, f in cls.model_fields.items() if DERIVED not in f.metadata]


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return frozenset((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(map(_hashable, value))
    return value


def problem(fix: str, *, at: str = "", value: Any = _UNSET, key: str = "") -> PydanticCustomError:
    """A problem of the key being validated; `at` names a key below it, `value` replaces its input,
    `key` names another key of the file (a check across sections)."""
    ctx: dict[str, Any] = {"fix": fix, "at": at, "key": key}
    if value is not _UNSET:
        ctx["value"] = value
    return PydanticCustomError("eos_config", "{fix}", ctx)


def from_file(info: ValidationInfo) -> bool:
    """Whether the values come from a pipeline file (the loader passes a context), rather than
    from code building a section itself."""
    return bool(info.context)


def _derived(value: Any, info: ValidationInfo) -> Any:
    # Runs only for a value given (a default is not validated): from a file, a derived value is
    # an unknown key, as any other.
    if from_file(info):
        raise PydanticCustomError("extra_forbidden", "Extra inputs are not permitted")
    return value


# Marks a field the section derives from its keys (or the loader from the file); `file_keys` and
# "unknown key" messages leave it out.
DERIVED = BeforeValidator(_derived)


def choice(choices: tuple[str, ...]) -> BeforeValidator:
    def check(value: Any) -> str:
        if value not in choices:
            raise problem(f"use {' or '.join(repr(c) for c in choices)}")
        return str(value)

    return BeforeValidator(check)


def check_conn_id(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise problem("give an Airflow connection id, or null for none")
    return value


def check_required_conn_id(value: Any) -> str:
    if not (isinstance(value, str) and value.strip()):
        raise problem("give an Airflow connection id (leave the key out for the default)")
    return value


def check_flag(value: Any) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"  # what a ${VAR} gives is always a string
    if not isinstance(value, bool):
        raise problem("use true or false")
    return value


def as_number(value: Any) -> Any:
    """A string that spells a number, as a float (what a ${VAR} gives is always a string)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return float(value)
    return value


def check_schedule(value: Any) -> str | None:
    """An Airflow preset, a 5-field cron croniter takes (as Airflow does) that fires, or None."""
    if value is None or value in SCHEDULE_PRESETS:
        return value
    if not isinstance(value, str) or value.startswith("@") or len(value.split()) != 5:
        raise problem(_CRON_FIX)
    try:
        croniter(value).get_next(datetime, start_time=datetime(2000, 1, 1))
    except CroniterBadDateError:
        raise problem(f"it never fires (no such date); {_CRON_FIX}") from None
    except CroniterError as e:  # what Airflow's timetable validation refuses
        raise problem(f"{e}; {_CRON_FIX}") from None
    return value


Schedule = Annotated[str | None, BeforeValidator(check_schedule)]
ConnId = Annotated[str | None, BeforeValidator(check_conn_id)]
RequiredConnId = Annotated[str, BeforeValidator(check_required_conn_id)]

S = TypeVar("S", bound=Section)


@cache
def _adapter(model: type[Section], name: str) -> TypeAdapter[Any]:
    field = model.model_fields[name]
    annotation: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return TypeAdapter(annotation)


def replaced(section: S, **changes: Any) -> S:
    """`section` with `changes`, each checked by its field's type and own rules (a bare model_copy
    checks nothing). Rules across keys (e.g. the partition columns against the schema) belong to
    the file and are not run again: the callers change values the file does not hold (the
    batch's schema, settings from a connection)."""
    checked = {}
    for name, value in changes.items():
        try:
            checked[name] = _adapter(type(section), name).validate_python(value)
        except ValidationError as e:
            reasons = []
            for err in e.errors(include_url=False):
                ctx = err.get("ctx") or {}
                reasons.append(f"{name}{ctx.get('at', '')} is not valid; {ctx.get('fix') or err['msg']}")
            raise ConfigError(f"{type(section).__name__}: " + "; ".join(reasons)) from None
    return section.model_copy(update=checked)
