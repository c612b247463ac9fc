"""Our own set of prompt injections, as turns a user (or a pasted document) might send, in
English and Chinese: what ``memoryd bench injections`` measures the instruction filter on.

Written for memoryd (issue 38); no dataset's text. Varied on purpose: direct and polite
commands, role claims and grabs for permissions, fake system tags, injections inside a story
or an ordinary turn, look-alike spellings (full-width letters, zero-width spaces, Cyrillic
letters), the same attack translated, and "remember that I am admin" aimed at the memory
itself. Each entry: (id, language, turn). The set lives with the meaning judge, whose exemplars
it is (``memoryd.server.screen._injection_exemplars``).
"""

from __future__ import annotations

from memoryd.server import FIRST_SET

INJECTIONS = FIRST_SET
