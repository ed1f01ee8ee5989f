"""Small inline-SVG charts that share one time axis. No JavaScript, no fonts, no network.

Every piece is built with `Markup.format`, which escapes each argument: labels may come from a hostile
server's log. The charts are returned as `Markup`, so the report's templates insert them as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

WIDTH, HEIGHT = 860, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 22, 26  # the band above the plot holds the title and the legend


class Axis:
    """Maps seconds and values to pixels for one chart; `x_max` is shared by all charts of a level."""

    def __init__(self, x_max: float, y_max: float, height: int = HEIGHT) -> None:
        self.x_max = max(x_max, 1e-9)
        self.y_max = y_max if y_max > 0 else 1.0
        self.height = height

    def x(self, t: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max(t, 0.0), self.x_max) / self.x_max

    def y(self, v: float) -> float:
        return self.height - BOTTOM - (self.height - TOP - BOTTOM) * min(max(v, 0.0), self.y_max) / self.y_max


def _plot_area(height: int, label: str) -> list[Markup]:
    return [
        Markup('<rect x="{}" y="{}" width="{}" height="{}" class="plot"/>').format(
            LEFT, TOP, WIDTH - LEFT - RIGHT, height - TOP - BOTTOM
        ),
        Markup('<text x="4" y="14" class="lbl">{}</text>').format(label),
    ]


def _frame(axis: Axis, y_label: str, y_fmt: str = "{:g}") -> list[Markup]:
    h = axis.height
    parts = _plot_area(h, y_label)
    for frac in (0.0, 0.5, 1.0):
        v = axis.y_max * frac
        y = axis.y(v)
        parts.append(
            Markup('<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/>').format(LEFT, WIDTH - RIGHT, y, y)
        )
        parts.append(
            Markup('<text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>').format(
                LEFT - 4, y + 4, y_fmt.format(v)
            )
        )
    parts += _time_ticks(axis, h)
    return parts


def _time_ticks(axis: Axis, height: int) -> list[Markup]:
    """Labels at round seconds (1, 2, 5, 10, 15, 30, 60... apart), about six of them."""
    step = next(
        (s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600) if axis.x_max / s <= 7), 7200
    )
    out, t = [], 0.0
    while t <= axis.x_max + 1e-9:
        label = f"{t / 60:g}m" if step >= 60 else f"{t:g}s"
        out.append(
            Markup('<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>').format(
                axis.x(t), height - 8, label
            )
        )
        t += step
    return out


def _svg(parts: list[Markup], height: int = HEIGHT, title: str = "") -> Markup:
    # Markup.join escapes any part that is not Markup already: nothing unescaped gets through.
    return (
        Markup('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="100%" role="img"'
               ' aria-label="{}">').format(WIDTH, height, title)
        + Markup("").join(parts)
        + Markup("</svg>")
    )


def line_chart(
    lines: Sequence[tuple[str, str, Sequence[tuple[float, float | None]]]],
    x_max: float,
    y_label: str,
    y_fmt: str = "{:g}",
) -> Markup:
    """`lines`: (name, css colour, [(t, value or None)]); a None breaks the line."""
    values = [v for _, _, pts in lines for _, v in pts if v is not None]
    axis = Axis(x_max, max(values) * 1.1 if values else 1.0)
    parts = _frame(axis, y_label, y_fmt)
    for i, (name, colour, points) in enumerate(lines):
        segments: list[list[str]] = [[]]
        for t, v in points:
            if v is None:
                segments.append([])
            else:
                segments[-1].append(f"{axis.x(t):.1f},{axis.y(v):.1f}")
        for seg in segments:
            if len(seg) == 1:
                x, y = seg[0].split(",")
                parts.append(Markup('<circle cx="{}" cy="{}" r="2" fill="{}"/>').format(x, y, colour))
            elif seg:
                parts.append(
                    Markup('<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>').format(
                        " ".join(seg), colour
                    )
                )
        parts.append(_legend(i, len(lines), name, colour))
    return _svg(parts, title=y_label)


def stacked_bars(
    buckets: Sequence[tuple[float, dict[str, int]]],
    width_s: float,
    x_max: float,
    keys: Sequence[tuple[str, str]],
    y_label: str,
) -> Markup:
    """One bar per time bucket, stacked by key: `keys` is [(key, css colour)] bottom to top."""
    totals = [sum(counts.get(k, 0) for k, _ in keys) for _, counts in buckets]
    axis = Axis(x_max, max(totals, default=0) * 1.1 or 1.0)
    parts = _frame(axis, y_label, "{:.0f}")
    for t, counts in buckets:
        x0, x1 = axis.x(t), axis.x(t + width_s)
        w = max(x1 - x0 - 0.5, 0.8)
        base = 0
        for key, colour in keys:
            n = counts.get(key, 0)
            if not n:
                continue
            y_top, y_bottom = axis.y(base + n), axis.y(base)
            parts.append(
                Markup('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}">'
                       "<title>{:.0f}s {}: {}</title></rect>").format(
                    x0, y_top, w, max(y_bottom - y_top, 0.5), colour, t, key, n
                )
            )
            base += n
    for i, (key, colour) in enumerate(keys):
        parts.append(_legend(i, len(keys), key, colour))
    return _svg(parts, title=y_label)


def event_strip(events: Sequence[tuple[float, str, str, int]], x_max: float, label: str) -> Markup:
    """Ticks on the time axis: (t, name, css colour, count), a row per name, the count in a tooltip."""
    names = list(dict.fromkeys(name for _, name, _, _ in events))[:8]
    height = TOP + BOTTOM + 18 * max(1, len(names))
    axis = Axis(x_max, 1.0, height=height)
    parts = _plot_area(height, label)
    parts += _time_ticks(axis, height)
    if not events:
        parts.append(Markup('<text x="{}" y="{}" class="tick">none</text>').format(LEFT + 8, TOP + 13))
    for row, name in enumerate(names):
        y = TOP + 18 * row
        parts.append(
            Markup('<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>').format(
                WIDTH - RIGHT - 4, y + 13, name
            )
        )
        for t, n, colour, count in events:
            if n == name:
                x = axis.x(t)
                parts.append(
                    Markup('<line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" stroke="{}" stroke-width="2">'
                           "<title>{:.1f}s {} × {}</title></line>").format(
                        x, x, y + 3, y + 16, colour, t, name, count
                    )
                )
    return _svg(parts, height=height, title=label)


def _legend(i: int, n: int, name: str, colour: str) -> Markup:
    x = WIDTH - RIGHT - 110 * (n - i)  # right-aligned, above the plot
    return Markup('<rect x="{}" y="5" width="10" height="10" fill="{}"/><text x="{}" y="14" class="tick">{}</text>').format(
        x, colour, x + 14, name
    )
