"""Field errors as the API server words them (apimachinery `util/validation/field`), and the
rules of names, labels and metadata (apimachinery `util/validation`, `api/validate/content`,
`api/validation/objectmeta.go`): what `validation.py` builds its checks of each kind from."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tests.sim.resources import NAMESPACES, ResourceInfo

OMIT = object()
"""A problem whose value is not shown (`field.Required`, `field.Forbidden`)."""

TYPES = {  # field.ErrorType: its text and the cause type of the Status
    "Invalid": ("Invalid value", "FieldValueInvalid"),
    "Required": ("Required value", "FieldValueRequired"),
    "NotFound": ("Not found", "FieldValueNotFound"),
    "Duplicate": ("Duplicate value", "FieldValueDuplicate"),
    "NotSupported": ("Unsupported value", "FieldValueNotSupported"),
    "Forbidden": ("Forbidden", "FieldValueForbidden"),
    "TooLong": ("Too long", "FieldValueTooLong"),
}
_BODY_ONLY = frozenset({"Required", "Forbidden", "TooLong"})


@dataclass(frozen=True)
class Problem:
    """One field error (apimachinery `util/validation/field.Error`)."""

    type: str
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """`ErrorBody()`: the type, the value (strings quoted) and the detail."""
        text = TYPES[self.type][0]
        if self.type not in _BODY_ONLY and self.value is not OMIT:
            value = self.value
            if isinstance(value, str):
                text += f": {json.dumps(value)}"
            elif isinstance(value, bool):
                text += f": {str(value).lower()}"
            elif isinstance(value, int | float | Decimal):
                text += f": {value}"
            else:
                text += f": {json.dumps(value, sort_keys=True, default=str)}"
        return f"{text}: {self.detail}" if self.detail else text

    def text(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": TYPES[self.type][1], "message": self.body(), "field": self.field}


# -- names and labels (apimachinery util/validation, api/validate/content) -------------------

LABEL_FMT = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
DNS_LABEL_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN_FMT = DNS_LABEL_FMT + r"(\." + DNS_LABEL_FMT + r")*"
CONFIG_KEY_FMT = r"[-._a-zA-Z0-9]+"
_LABEL = re.compile(f"^{LABEL_FMT}$")
_LABEL_VALUE = re.compile(f"^({LABEL_FMT})?$")
_DNS_LABEL = re.compile(f"^{DNS_LABEL_FMT}$")
_DNS_SUBDOMAIN = re.compile(f"^{DNS_SUBDOMAIN_FMT}$")
CONFIG_KEY = re.compile(f"^{CONFIG_KEY_FMT}$")


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """`RegexError`: the message, its examples and the regular expression."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len(length: int) -> str:
    return f"must be no more than {length} characters"


def dns_subdomain(value: str) -> list[str]:
    """`IsDNS1123Subdomain`."""
    errors = [max_len(253)] if len(value) > 253 else []
    if not _DNS_SUBDOMAIN.match(value):
        errors.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                DNS_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errors


def dns_label(value: str) -> list[str]:
    """`IsDNS1123Label`."""
    errors = [max_len(63)] if len(value) > 63 else []
    if not _DNS_LABEL.match(value):
        if _DNS_SUBDOMAIN.match(value):
            errors.append("must not contain dots")
        else:
            errors.append(
                regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    DNS_LABEL_FMT,
                    "my-name",
                    "123-abc",
                )
            )
    return errors


_KEY_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)


def label_key(value: str) -> list[str]:
    """`IsLabelKey` (a qualified name): an optional DNS subdomain prefix and '/', a name."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_KEY_MESSAGE, LABEL_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {e}" for e in dns_subdomain(parts[0])]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append(f"name part {max_len(63)}")
    if not _LABEL.match(name):
        errors.append(
            "name part " + regex_error(_KEY_MESSAGE, LABEL_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(value: str) -> list[str]:
    """`IsLabelValue`."""
    errors = [max_len(63)] if len(value) > 63 else []
    if not _LABEL_VALUE.match(value):
        errors.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                f"({LABEL_FMT})?",
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def labels(values: Any, path: str) -> list[Problem]:
    """`ValidateLabels`: every key, then every value, at the map's path."""
    found = []
    for key, value in (values or {}).items():
        found += [Problem("Invalid", path, key, e) for e in label_key(str(key))]
        found += [Problem("Invalid", path, value, e) for e in label_value(str(value))]
    return found


ANNOTATIONS_MAX = 256 * 1024


def metadata(info: ResourceInfo, obj: Mapping[str, Any]) -> list[Problem]:
    """`ValidateObjectMeta`: the name as the kind names it, labels, annotations."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    check = dns_label if info is NAMESPACES else dns_subdomain
    found = [Problem("Invalid", "metadata.name", name, e) for e in check(name)] if name else []
    found += labels(meta.get("labels"), "metadata.labels")
    annotations = meta.get("annotations") or {}
    for key in annotations:
        found += [
            Problem("Invalid", "metadata.annotations", key, e) for e in label_key(key.lower())
        ]
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX:
        found.append(
            Problem(
                "TooLong",
                "metadata.annotations",
                detail=f"may not be more than {ANNOTATIONS_MAX} bytes",
            )
        )
    return found
