"""Sections of one page each, too big to sit in the page script (pages/), named <page>_<section>."""
