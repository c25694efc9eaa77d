"""Colours as people with colour-vision deficiency see them: the full-severity simulations of
Machado, Oliveira and Fernandes (2009) in linear RGB, and CIELAB distances between colours."""

from __future__ import annotations

import math

#: Full-severity simulation matrices (linear RGB), and normal vision.
VISIONS = {
    "normal": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}  # fmt: skip


def _linear(channel: int) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def seen(color: str, vision: str) -> tuple[float, float, float]:
    """``#rrggbb`` as ``vision`` sees it, in CIELAB."""
    rgb = [_linear(int(color[i : i + 2], 16)) for i in (1, 3, 5)]
    matrix = VISIONS[vision]
    simulated = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb, strict=True))))
                 for row in matrix]  # fmt: skip
    return _lab((simulated[0], simulated[1], simulated[2]))


def distance(a: str, b: str, vision: str) -> float:
    """How far apart two colours look to ``vision`` (CIE76 delta E; 2.3 is just noticeable)."""
    return math.dist(seen(a, vision), seen(b, vision))


def chroma(color: str) -> float:
    """How far from grey a colour is (CIELAB chroma; a grey's is 0)."""
    _, a, b = seen(color, "normal")
    return math.hypot(a, b)
