// html_report.hpp: cuvmm-plan's report for people, one self-contained HTML file (report.html)
// written beside plan.json from the same measurements and recommendation.
//
// Self-contained: the styles are inline, the charts are inline SVG (svg_chart.hpp), there is no
// script, and a Content-Security-Policy forbids loading anything, so the file reads the same
// offline, from a CI artefact or an e-mail. Every piece of text that comes from a measurement (a
// device name, a trace file, a note) is escaped. A section whose data was not measured says so in
// words instead of showing an empty table or chart. The sections, by id, are report_section_ids.
#pragma once

#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "report.hpp"

namespace cuvmm::plan {

/// The report's sections, by their HTML id, in the order they appear.
inline constexpr std::array<const char*, 10> report_section_ids = {
    "recommendation", "machine", "driver-calls", "thread-scaling", "growth",
    "reach",          "trace-replay", "arena-stats", "notes", "files"};

/// The recommendation as sentences, one per figure measured (the terminal's lines in words).
std::vector<std::string> recommendation_sentences(const Recommendation& recommendation,
                                                  const Measurements& measurements);

/// Writes the whole report. `files` are the names of the files written beside it (plan.json, the
/// CSVs, the plots), linked from its last section.
void write_html_report(std::ostream& out, const Measurements& measurements, const Recommendation& recommendation,
                       const std::vector<std::string>& files);

}  // namespace cuvmm::plan
