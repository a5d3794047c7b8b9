"""Small SVG checks shared by the drawing tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def parse_svg(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == SVG_NS + "svg"
    return root


def groups_by_id(root: ET.Element) -> dict:
    return {g.get("id"): g for g in root.iter(SVG_NS + "g") if g.get("id")}


def classes(el: ET.Element) -> set:
    return set((el.get("class") or "").split())


def all_text(root: ET.Element) -> list[str]:
    return [el.text for el in root.iter() if el.text]
