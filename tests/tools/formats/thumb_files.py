"""THUMB 1.0 release-layout rows and files, written by the tests themselves."""


def row(system, image, p, r, fl, con, inc, **overrides):
    """One rated caption in the release layout, its human_score the rubric's total."""
    line = {"SYS": system, "seg_id": image, "set_id": int(image), "hyp": f"{system} on {image}",
            "image": f"COCO_val2014_{int(image):012d}.jpg", "P": float(p), "R": float(r),
            "Fl": fl, "Inc": inc, "Con": con, "human_score": (p + r) / 2 + fl + con + inc}
    line.update(overrides)
    return line
