"""Normalisation of extracted text: relative dates against the turn's date, quantities in one
canonical form, entity tags. Pure: stdlib only.
"""

from ._normalise import Normalised, dated, different_dates, entity_tag, normalise, wide_character

__all__ = ["Normalised", "dated", "different_dates", "entity_tag", "normalise", "wide_character"]
