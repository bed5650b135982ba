//! A tiny SVG line-chart writer, so HTML reports need no script library or network.

use std::fmt::Write;

/// Axis mapping.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    Linear,
    /// Base-2 logarithm: concurrency levels that double sit evenly.
    Log2,
    /// Percentiles stretched toward the tail: x = -log10(1 - p/100), as HdrHistogram plots.
    Tail,
}

/// Largest tail position: 99.999%.
const TAIL_MAX: f64 = 5.0;

impl Scale {
    fn fwd(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2 => v.max(1e-9).log2(),
            Scale::Tail => {
                let rest = 1.0 - v / 100.0;
                if rest <= 10f64.powf(-TAIL_MAX) {
                    TAIL_MAX
                } else {
                    -rest.log10()
                }
            }
        }
    }
}

pub(crate) const PALETTE: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// One line.
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) color: &'static str,
    pub(crate) points: Vec<(f64, f64)>,
    /// Draw circles at points (off for dense time series).
    pub(crate) dots: bool,
}

/// A vertical annotation line.
pub(crate) struct Marker {
    pub(crate) x: f64,
    pub(crate) label: String,
    pub(crate) color: &'static str,
}

/// A whole chart.
pub(crate) struct Chart {
    pub(crate) id: &'static str,
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) x_scale: Scale,
    pub(crate) series: Vec<Series>,
    pub(crate) markers: Vec<Marker>,
    /// Explicit x ticks (data values); computed when empty.
    pub(crate) x_ticks: Vec<f64>,
}

const W: f64 = 660.0;
const H: f64 = 330.0;
const ML: f64 = 64.0;
/// Room right of the plot for the legend, so it never covers a curve.
const MR: f64 = 148.0;
const MT: f64 = 40.0;
const MB: f64 = 50.0;

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Short number for tick labels: 3 significant digits, k/M suffixes.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let ax = x.abs();
    let s = if ax == 0.0 {
        "0".to_string()
    } else if ax >= 100.0 {
        format!("{x:.0}")
    } else if ax >= 10.0 {
        format!("{x:.1}")
    } else if ax >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

fn nice_step(range: f64, target: f64) -> f64 {
    let raw = (range / target).max(1e-12);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let step = nice_step(hi - lo, 5.0);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 20 {
        out.push(v);
        v += step;
    }
    out
}

impl Chart {
    /// Renders the chart as an inline `<svg>` element.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg class="chart" id="{}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">"#,
            self.id,
            esc(&self.title)
        );
        let _ = write!(
            out,
            r#"<text x="{}" y="22" class="title" text-anchor="middle">{}</text>"#,
            W / 2.0,
            esc(&self.title)
        );
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        if pts.is_empty() {
            let _ = write!(
                out,
                r#"<text x="{}" y="{}" text-anchor="middle" class="empty">no data</text></svg>"#,
                W / 2.0,
                H / 2.0
            );
            return out;
        }
        let xs = self.x_scale;
        let (mut x0, mut x1) = pts
            .iter()
            .map(|p| xs.fwd(p.0))
            .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
        for m in &self.markers {
            x0 = x0.min(xs.fwd(m.x));
            x1 = x1.max(xs.fwd(m.x));
        }
        if xs == Scale::Linear && x0 > 0.0 && x0 < (x1 - x0) {
            x0 = 0.0;
        }
        if (x1 - x0).abs() < 1e-12 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let y_max = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
        let y_ticks = linear_ticks(0.0, if y_max > 0.0 { y_max } else { 1.0 });
        let y1 = y_ticks.last().copied().unwrap_or(1.0).max(y_max).max(1e-9);
        let pw = W - ML - MR;
        let ph = H - MT - MB;
        let px = |x: f64| ML + (xs.fwd(x) - x0) / (x1 - x0) * pw;
        let py = |y: f64| MT + ph - (y / y1) * ph;
        // grid and y ticks
        for t in &y_ticks {
            let y = py(*t);
            let _ = write!(
                out,
                r#"<line x1="{ML}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" class="grid"/><text x="{:.1}" y="{:.1}" text-anchor="end" class="tick">{}</text>"#,
                ML + pw,
                ML - 6.0,
                y + 4.0,
                num(*t)
            );
        }
        // x ticks
        let x_ticks: Vec<(f64, String)> = if !self.x_ticks.is_empty() {
            self.x_ticks.iter().map(|&v| (v, num(v))).collect()
        } else {
            match xs {
                Scale::Tail => [0.0, 90.0, 99.0, 99.9, 99.99, 99.999]
                    .iter()
                    .map(|&p| (p, format!("{p}%")))
                    .collect(),
                Scale::Log2 => {
                    let mut v = 2f64.powf(x0.floor());
                    let mut t = Vec::new();
                    while xs.fwd(v) <= x1 + 1e-9 && t.len() < 30 {
                        if xs.fwd(v) >= x0 - 1e-9 {
                            t.push((v, num(v)));
                        }
                        v *= 2.0;
                    }
                    t
                }
                Scale::Linear => linear_ticks(x0, x1)
                    .into_iter()
                    .map(|v| (v, num(v)))
                    .collect(),
            }
        };
        let mut last_label_x = f64::MIN;
        for (v, label) in &x_ticks {
            let fx = xs.fwd(*v);
            if fx < x0 - 1e-9 || fx > x1 + 1e-9 {
                continue;
            }
            let x = px(*v);
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{:.1}" class="grid"/>"#,
                MT + ph
            );
            if x - last_label_x >= 26.0 {
                let _ = write!(
                    out,
                    r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle" class="tick">{}</text>"#,
                    MT + ph + 16.0,
                    esc(label)
                );
                last_label_x = x;
            }
        }
        // axes
        let _ = write!(
            out,
            r#"<line x1="{ML}" y1="{MT}" x2="{ML}" y2="{b:.1}" class="axis"/><line x1="{ML}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" class="axis"/>"#,
            b = MT + ph,
            r = ML + pw
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="label">{}</text>"#,
            ML + pw / 2.0,
            H - 10.0,
            esc(&self.x_label)
        );
        let _ = write!(
            out,
            r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle" class="label">{}</text>"#,
            MT + ph / 2.0,
            esc(&self.y_label)
        );
        // markers
        for m in &self.markers {
            let x = px(m.x);
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{:.1}" stroke="{}" class="marker"/><text x="{:.1}" y="{:.1}" class="mlabel" fill="{}">{}</text>"#,
                MT + ph,
                m.color,
                x + 3.0,
                MT + ph - 6.0,
                m.color,
                esc(&m.label)
            );
        }
        // series
        for s in &self.series {
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            if points.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (x, y) in &points {
                let _ = write!(d, "{:.1},{:.1} ", px(*x), py(*y));
            }
            let _ = write!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"><title>{}</title></polyline>"#,
                d.trim_end(),
                s.color,
                esc(&s.name)
            );
            if s.dots {
                for (x, y) in &points {
                    let _ = write!(
                        out,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: x={} y={}</title></circle>"#,
                        px(*x),
                        py(*y),
                        s.color,
                        esc(&s.name),
                        num(*x),
                        num(*y)
                    );
                }
            }
        }
        // legend
        let mut ly = MT + 4.0;
        for s in self.series.iter().filter(|s| !s.points.is_empty()) {
            let lx = ML + pw + 12.0;
            // About 20 characters fit in the margin; the full name is in the tooltip.
            let short: String = if s.name.chars().count() > 20 {
                s.name.chars().take(19).chain(['…']).collect()
            } else {
                s.name.clone()
            };
            let _ = write!(
                out,
                r#"<g><title>{}</title><rect x="{lx:.1}" y="{:.1}" width="12" height="4" fill="{}"/><text x="{:.1}" y="{:.1}" class="legend">{}</text></g>"#,
                esc(&s.name),
                ly + 3.0,
                s.color,
                lx + 16.0,
                ly + 8.0,
                esc(&short)
            );
            ly += 14.0;
        }
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.5), "1.5");
        assert_eq!(num(12345.0), "12.3k");
        assert_eq!(num(256.0), "256");
        assert_eq!(num(0.0421), "0.042");
    }

    #[test]
    fn renders_well_formed_svg() {
        let c = Chart {
            id: "t",
            title: "A < B".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_scale: Scale::Log2,
            series: vec![Series {
                name: "s".into(),
                color: PALETTE[0],
                points: vec![(1.0, 2.0), (2.0, 4.0), (4.0, 3.0)],
                dots: true,
            }],
            markers: vec![],
            x_ticks: vec![],
        };
        let svg = c.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("A &lt; B"));
        assert_eq!(svg.matches("<circle").count(), 3);
    }
}
