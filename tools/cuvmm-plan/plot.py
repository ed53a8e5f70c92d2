#!/usr/bin/env python3
"""Plots of a cuvmm-plan run: reads DIR/plan.json and DIR/*.csv, writes PNGs into DIR.

  growth_time.png     total growth time against size reached, a panel per append size, a line per strategy
  driver_latency.png  median latency of each driver call against chunk size (log-log)
  driver_threads.png  driver-call cycles per second and median latency against thread count
  trace_memory.png    memory held by each allocator over the replayed trace, and what it asked for

Usage: plot.py DIR, or plot.py --check (exit 0 when matplotlib can be imported).
Exit status 3 when matplotlib is missing (cuvmm-plan says so), 2 on bad input.
"""
import csv
import json
import os
import statistics
import sys

GIB = float(1 << 30)
MIB = float(1 << 20)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def human(nbytes):
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024.0)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} B"


def save(plt, fig, ax, legend, path):
    """Grid and (when there is anything to name) legend on `ax`, then writes `path` and closes."""
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_growth_bars(ax, rows, strategies, colors):
    """Total time of each strategy's (median) run to one size, the fastest and slowest runs as the
    error bar; a hatched bar for a strategy that stopped early. Returns whether any stopped."""
    stopped = False
    for x, strategy in enumerate(strategies):
        for r in rows:
            if r["strategy"] != strategy:
                continue
            y = float(r["total_seconds"])
            low = float(r.get("min_total_seconds") or y)
            high = float(r.get("max_total_seconds") or y)
            early = r["status"] != "ok"
            stopped = stopped or early
            ax.bar([x], [y], yerr=([y - low], [high - y]), capsize=3, color=colors[strategy], label=strategy,
                   hatch="xx" if early else None, edgecolor="black" if early else None)
    ax.set_xticks([])
    ax.set_xlabel("strategy (see legend)")
    # Bars from zero keep their lengths honest; only times over orders of magnitude need log axes.
    times = [float(r["total_seconds"]) for r in rows if float(r["total_seconds"]) > 0]
    if times and max(times) / min(times) > 20:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    return stopped


def plot_growth(plt, plan, rows, out):
    """One panel per append size; in each, total time against size reached, one line per strategy."""
    appends = sorted({int(r["append_bytes"]) for r in rows}) or [0]
    fig, axes = plt.subplots(1, len(appends), figsize=(4.5 * len(appends), 4.5), squeeze=False)
    strategies = sorted({r["strategy"] for r in rows})
    colors = {s: f"C{i}" for i, s in enumerate(strategies)}
    stopped = False
    for ax, append in zip(axes[0], appends):
        targets = {int(r["target_bytes"]) for r in rows if int(r["append_bytes"]) == append}
        if len(targets) == 1:  # one size only (the quick profile): a bar per strategy
            stopped = plot_growth_bars(ax, [r for r in rows if int(r["append_bytes"]) == append], strategies,
                                       colors) or stopped
            ax.set_title(f"{human(append)} appends to {human(targets.pop())}", fontsize=10)
            ax.grid(True, which="both", axis="y", alpha=0.3)
            continue
        for strategy in strategies:
            mine = [r for r in rows if r["strategy"] == strategy and int(r["append_bytes"]) == append]
            done = sorted((int(r["reached_bytes"]) / GIB, float(r["total_seconds"]),
                           float(r.get("min_total_seconds") or r["total_seconds"]),
                           float(r.get("max_total_seconds") or r["total_seconds"])) for r in mine if r["status"] == "ok")
            if done:
                xs, ys, lows, highs = zip(*done)
                # The median run, with the fastest and slowest runs as the error bar.
                ax.errorbar(xs, ys, yerr=([y - lo for y, lo in zip(ys, lows)], [hi - y for y, hi in zip(ys, highs)]),
                            marker="o", capsize=3, color=colors[strategy], label=strategy)
            for r in mine:
                if r["status"] != "ok" and int(r["reached_bytes"]) > 0:
                    stopped = True
                    ax.scatter([int(r["reached_bytes"]) / GIB], [float(r["total_seconds"])], marker="x", s=60,
                               color=colors[strategy])
        ax.set_title(f"{human(append)} appends", fontsize=10)
        ax.set_xlabel("size reached (GiB)")
        # Times span orders of magnitude between strategies: log axes keep the close ones apart.
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("total time: appends and fills (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8)
    title = f"Growth on {plan['device']['name']} ({plan['profile']} profile)"
    if stopped:
        title += "; x or hatched: stopped early (out of memory or address range)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(os.path.join(out, "growth_time.png"), dpi=120)
    plt.close(fig)


def plot_driver(plt, plan, rows, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    calls = {}
    for r in rows:
        calls.setdefault(r["call"], []).append((int(r["chunk_bytes"]) / MIB, float(r["median_us"])))
    for call, points in calls.items():
        points.sort()
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=call)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("chunk size (MiB)")
    ax.set_ylabel("median latency per call (µs)")
    ax.set_title(f"Driver calls on {plan['device']['name']}", fontsize=10)
    save(plt, fig, ax, bool(calls), os.path.join(out, "driver_latency.png"))


def plot_threads(plt, plan, rows, out):
    """Left: whole create-to-release cycles per second against threads (the median over the
    repeats, with their lowest and highest as an error bar); right: median latency of each call
    against threads (the median over the repeats); a line per chunk size (and call)."""
    fig, (rate_ax, latency_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    rates, latencies = {}, {}
    for r in rows:
        chunk, threads = int(r["chunk_bytes"]), int(r["threads"])
        by_threads = rates.setdefault(chunk, {})
        if r["call"] == "create":  # one rate per repeat (every call's row repeats it)
            by_threads.setdefault(threads, []).append(float(r["cycles_per_second"]))
        latencies.setdefault((chunk, r["call"]), {}).setdefault(threads, []).append(float(r["median_us"]))
    for chunk, by_threads in sorted(rates.items()):
        xs = sorted(by_threads)
        mids = [statistics.median(by_threads[x]) for x in xs]
        low = [m - min(by_threads[x]) for x, m in zip(xs, mids)]
        high = [max(by_threads[x]) - m for x, m in zip(xs, mids)]
        rate_ax.errorbar(xs, mids, yerr=[low, high], marker="o", capsize=3, label=f"{human(chunk)} chunks")
    for (chunk, call), by_threads in sorted(latencies.items()):
        xs = sorted(by_threads)
        latency_ax.plot(xs, [statistics.median(by_threads[x]) for x in xs], marker=".", label=f"{call}, {human(chunk)}")
    counts = sorted({int(r["threads"]) for r in rows})
    for ax in (rate_ax, latency_ax):
        ax.set_xticks(counts)
        ax.set_xlabel("threads making driver calls at once")
    rate_ax.set_ylabel("create..release cycles per second (all threads)")
    latency_ax.set_yscale("log")
    latency_ax.set_ylabel("median latency per call (µs)")
    latency_ax.legend(fontsize=6, ncol=2)
    latency_ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"Driver calls from several threads on {plan['device']['name']}", fontsize=10)
    save(plt, fig, rate_ax, bool(rates), os.path.join(out, "driver_threads.png"))


def plot_trace(plt, plan, rows, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    by_allocator = {}
    for r in rows:
        by_allocator.setdefault(r["allocator"], []).append(
            (int(r["op_index"]), int(r["requested_bytes"]) / GIB, int(r["held_bytes"]) / GIB))
    requested_drawn = False
    for allocator, points in by_allocator.items():
        points.sort()
        ops = [p[0] for p in points]
        if not requested_drawn:
            ax.plot(ops, [p[1] for p in points], color="black", linestyle="--", label="requested (live)")
            requested_drawn = True
        ax.plot(ops, [p[2] for p in points], label=f"held by {allocator}")
    ax.set_xlabel("trace operation")
    ax.set_ylabel("memory (GiB)")
    ax.set_title(f"Memory over the trace: {plan['trace']['source']}", fontsize=8)
    save(plt, fig, ax, bool(by_allocator), os.path.join(out, "trace_memory.png"))


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if out != "--check":
            print("plot.py: matplotlib is not installed (Debian: python3-matplotlib)", file=sys.stderr)
        return 3
    if out == "--check":
        return 0
    try:
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
        growth = read_csv(os.path.join(out, "growth.csv"))
        driver = read_csv(os.path.join(out, "driver_calls.csv"))
        threads = read_csv(os.path.join(out, "driver_threads.csv"))
        trace = read_csv(os.path.join(out, "trace_memory.csv"))
    except (OSError, ValueError, KeyError) as error:
        print(f"plot.py: cannot read the results in {out}: {error}", file=sys.stderr)
        return 2
    plot_growth(plt, plan, growth, out)
    plot_driver(plt, plan, driver, out)
    plot_threads(plt, plan, threads, out)
    plot_trace(plt, plan, trace, out)
    print(f"plot.py: wrote growth_time.png, driver_latency.png, driver_threads.png, trace_memory.png in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
