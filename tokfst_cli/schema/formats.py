"""``format`` as an assertion: the decoded strings of nine formats as regexes (draft 2020-12 Sec. 7.3).

date, time, date-time    RFC 3339 full-date / full-time / date-time: days per month with leap
                         years (Feb 29 in the years divisible by 4, not by 100 unless by 400),
                         "T"/"Z" in either case; a leap second only as 23:59:60 written in UTC
                         (Z, +00:00, -00:00): the exact rule (23:59:60 UTC once any offset is
                         applied) ties each of the 1440 local times to its offsets and takes
                         11,000 states, so 15:59:60-08:00 is rejected (sound, not complete)
email                    RFC 5321 Mailbox: a dot-string or quoted-string local part, then a
                         domain (letters, digits, hyphens) or an address literal ([IPv4],
                         [IPv6:...], [tag:...]); no length limits
uuid                     RFC 4122: 8-4-4-4-12 hex digits, any case, any version or variant
uri                      RFC 3986 URI (with a scheme), ASCII only
ipv4, ipv6               RFC 2673 dotted quad (no leading zeros); RFC 4291 Sec. 2.2 text forms
                         (with "::" and an embedded dotted quad; no zone, no brackets)
hostname                 RFC 1123 labels of 1-63 letters, digits and inner hyphens, at most
                         253 characters in all (23,809 states: the position in the label times
                         the length so far); A-labels "xn--..." are not decoded as Punycode

uri-reference            RFC 3986 URI-reference (a URI or a relative reference)
json-pointer             RFC 6901; relative-json-pointer: draft-bhutton-relative-json-pointer
duration                 RFC 3339 Appendix A (ISO 8601 durations: P...Y...M...D, T...H...M...S, ...W)

Any other format is an annotation: accepted, not asserted, and named in the warnings.
"""

from __future__ import annotations

from functools import lru_cache

import pynini

from tokfst_cli.schema.automata import Budget, regex
from tokfst_cli.schema.strings import any_body

_D2 = "[0-9]{2}"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
DATE = ("(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
        f"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)")
_HOUR, _MINUTE = "(?:[01][0-9]|2[0-3])", "[0-5][0-9]"
_FRACTION = r"(?:\.[0-9]+)?"
_OFFSET = f"(?:[Zz]|[+-]{_HOUR}:{_MINUTE})"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H}:{_H}|{IPV4})"
IPV6 = "(?:" + "|".join([
    f"(?:{_H}:){{6}}{_LS32}",
    f"::(?:{_H}:){{5}}{_LS32}",
    f"(?:{_H})?::(?:{_H}:){{4}}{_LS32}",
    f"(?:(?:{_H}:){{0,1}}{_H})?::(?:{_H}:){{3}}{_LS32}",
    f"(?:(?:{_H}:){{0,2}}{_H})?::(?:{_H}:){{2}}{_LS32}",
    f"(?:(?:{_H}:){{0,3}}{_H})?::{_H}:{_LS32}",
    f"(?:(?:{_H}:){{0,4}}{_H})?::{_LS32}",
    f"(?:(?:{_H}:){{0,5}}{_H})?::{_H}",
    f"(?:(?:{_H}:){{0,6}}{_H})?::",
]) + ")"
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*"
_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_QUOTED = r'"(?:[ !#-\[\]-~]|\\[ -~])*"'
_ADDRESS_LITERAL = rf"\[(?:{IPV4}|IPv6:{IPV6}|[A-Za-z0-9-]*[A-Za-z0-9]:[!-Z\^-~]+)\]"
EMAIL = rf"(?:{_ATOM}(?:\.{_ATOM})*|{_QUOTED})@(?:{_DOMAIN}|{_ADDRESS_LITERAL})"
UUID = "-".join(f"[0-9A-Fa-f]{{{n}}}" for n in (8, 4, 4, 4, 12))
_UNRESERVED, _SUB_DELIMS, _PCT = "-A-Za-z0-9._~", "!$&'()*+,;=", "%[0-9A-Fa-f]{2}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_USERINFO = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_HOST = (rf"(?:\[(?:{IPV6}|v[0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+)\]"
         f"|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)")
_AUTHORITY = f"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_HIER = f"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR}+(?:/{_PCHAR}*)*|)"
_QUERY_FRAGMENT = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
URI = rf"[A-Za-z][A-Za-z0-9+.-]*:{_HIER}{_QUERY_FRAGMENT}"
_SEGMENT_NC = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_RELATIVE = f"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_SEGMENT_NC}(?:/{_PCHAR}*)*|)"
URI_REFERENCE = f"(?:{URI}|{_RELATIVE}{_QUERY_FRAGMENT})"
JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"
RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"
_N = "[0-9]+"
_DUR_TIME = f"T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)"
DURATION = f"P(?:(?:{_N}D|{_N}M(?:{_N}D)?|{_N}Y(?:{_N}M(?:{_N}D)?)?)(?:{_DUR_TIME})?|{_DUR_TIME}|{_N}W)"

FORMATS = ("date", "time", "date-time", "email", "uuid", "uri", "ipv4", "ipv6", "hostname", "uri-reference",
           "json-pointer", "relative-json-pointer", "duration")


def _time() -> str:
    """full-time; a leap second only at 23:59:60 UTC written in UTC (Z, +00:00 or -00:00)."""
    ordinary = f"{_HOUR}:{_MINUTE}:{_MINUTE}{_FRACTION}{_OFFSET}"
    return f"(?:{ordinary}|23:59:60{_FRACTION}(?:[Zz]|[+-]00:00))"


def language(name: str, budget: Budget) -> pynini.Fst | None:
    """The decoded strings of format ``name`` (one of :data:`FORMATS`); built once per size limit."""
    return _language(name, budget.max_states)


@lru_cache(maxsize=None)
def _language(name: str, max_states: int) -> pynini.Fst | None:
    budget = Budget(max_states, any_body)
    if name == "hostname":
        return budget.intersect(regex(_DOMAIN, budget), regex("[!-~]{1,253}", budget), "format hostname")
    pattern = {"time": _time(), "date-time": DATE + "[Tt]" + _time(), "date": DATE, "email": EMAIL, "uuid": UUID,
               "uri": URI, "ipv4": IPV4, "ipv6": IPV6, "uri-reference": URI_REFERENCE, "json-pointer": JSON_POINTER,
               "relative-json-pointer": RELATIVE_JSON_POINTER, "duration": DURATION}[name]
    return regex(pattern, budget)
