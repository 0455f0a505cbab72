#include "bench/grader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace tokentap::bench {

namespace {

bool space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
bool digit(char c) noexcept {
  return c >= '0' && c <= '9';
}
char lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}
bool letter(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Spaces and the emphasis around an answer (`**Paris**.`, `$42$`) and one closing period.
std::string_view trim(std::string_view s) noexcept {
  const auto wrap = [](char c) { return space(c) || c == '*' || c == '$'; };
  while (!s.empty() && wrap(s.front())) s.remove_prefix(1);
  while (!s.empty() && wrap(s.back())) s.remove_suffix(1);
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  while (!s.empty() && wrap(s.back())) s.remove_suffix(1);
  return s;
}

// The position of the last case-insensitive occurrence of `what` (lower case) in `s`, or npos.
std::size_t rfind_icase(std::string_view s, std::string_view what) noexcept {
  if (what.size() > s.size()) return std::string_view::npos;
  for (std::size_t i = s.size() - what.size() + 1; i-- > 0;) {
    std::size_t k = 0;
    while (k < what.size() && lower(s[i + k]) == what[k]) ++k;
    if (k == what.size()) return i;
  }
  return std::string_view::npos;
}

// Spacing collapsed, letters in lower case: what exact compares.
std::string normalized(std::string_view s) {
  std::string out;
  bool gap = false;
  for (const char c : trim(s)) {
    if (space(c)) {
      gap = !out.empty();
      continue;
    }
    if (gap) out += ' ';
    gap = false;
    out += lower(c);
  }
  return out;
}

}  // namespace

std::string_view after_reasoning(std::string_view content) noexcept {
  constexpr std::string_view close = "</think>";
  const auto at = content.rfind(close);
  return at == std::string_view::npos ? content : content.substr(at + close.size());
}

std::string_view stated_answer(std::string_view text) noexcept {
  if (const auto at = text.rfind("\\boxed{"); at != std::string_view::npos) {
    const auto from = at + 7;
    int depth = 1;
    for (auto i = from; i < text.size(); ++i) {
      if (text[i] == '{') ++depth;
      if (text[i] == '}' && --depth == 0) return trim(text.substr(from, i - from));
    }
  }
  for (const std::string_view marker : {"answer is", "answer:"}) {
    if (const auto at = rfind_icase(text, marker); at != std::string_view::npos) {
      auto rest = text.substr(at + marker.size());
      rest = rest.substr(0, rest.find('\n'));
      while (!rest.empty() && (space(rest.front()) || rest.front() == ':')) rest.remove_prefix(1);
      if (!trim(rest).empty()) return trim(rest);
    }
  }
  while (!text.empty()) {
    const auto nl = text.rfind('\n', text.size() - 1);
    const auto line = nl == std::string_view::npos ? text : text.substr(nl + 1);
    if (!trim(line).empty()) return trim(line);
    if (nl == std::string_view::npos) break;
    text = text.substr(0, nl);
  }
  return {};
}

std::optional<double> last_number(std::string_view text) noexcept {
  // The last digit ends it; back from there over digits, a decimal point, thousands separators
  // between digits and an exponent (`3e8`, `1.5E-3`); a minus sign not written between two
  // numbers (`2023-2024` ends in 2024, not in -2024).
  std::size_t end = text.size();
  while (end > 0 && !digit(text[end - 1])) --end;
  if (end == 0) return std::nullopt;
  std::size_t begin = end;
  const auto at = [&](std::size_t back) { return begin >= back ? text[begin - back] : '\0'; };
  for (;;) {
    while (begin > 0 && (digit(at(1)) || at(1) == '.' || (at(1) == ',' && digit(at(2))))) --begin;
    if ((at(1) == '+' || at(1) == '-') && lower(at(2)) == 'e' && digit(at(3)))
      begin -= 2;
    else if (lower(at(1)) == 'e' && digit(at(2)))
      begin -= 1;
    else
      break;
  }
  if (at(1) == '-' && !digit(at(2)) && !letter(at(2))) --begin;
  std::string digits;
  for (auto i = begin; i < end; ++i)
    if (text[i] != ',') digits += text[i];
  const char* first = digits.data();
  if (*first == '.') ++first;  // "..5": the number is 5
  double v = 0;
  const auto r = std::from_chars(first, digits.data() + digits.size(), v);
  if (r.ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<grader> grader::make(std::string_view kind_name, std::string_view expected,
                                   std::string& error) {
  grader g;
  g.expected_ = std::string(expected);
  if (kind_name == "exact") {
    g.kind_ = kind::exact;
    g.expected_ = normalized(expected);
    if (g.expected_.empty()) return error = "grader exact needs a non-empty answer", std::nullopt;
  } else if (kind_name == "numeric") {
    g.kind_ = kind::numeric;
    const auto n = last_number(expected);
    if (!n || trim(expected).size() > 64)
      return error =
                 "grader numeric needs a number as the answer, not '" + std::string(expected) + "'",
             std::nullopt;
    g.number_ = *n;
  } else if (kind_name == "choice") {
    g.kind_ = kind::choice;
    const auto t = trim(expected);
    if (t.size() != 1 || !letter(t[0]))
      return error = "grader choice needs one letter as the answer, not '" + std::string(expected) +
                     "'",
             std::nullopt;
    g.expected_ = std::string(1, static_cast<char>(std::toupper(static_cast<unsigned char>(t[0]))));
  } else if (kind_name == "regex") {
    g.kind_ = kind::regex;
    try {
      g.pattern_ = std::regex(g.expected_, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return error = "grader regex: '" + std::string(expected) + "' is not a pattern (" + e.what() +
                     ")",
             std::nullopt;
    }
  } else {
    return error = "grader must be exact, numeric, choice or regex, not '" +
                   std::string(kind_name) + "'",
           std::nullopt;
  }
  return g;
}

std::string grader::extract(std::string_view text) const {
  const auto answer_text = after_reasoning(text);
  switch (kind_) {
    case kind::exact:
      return normalized(stated_answer(answer_text));
    case kind::numeric:
      if (const auto n = last_number(stated_answer(answer_text))) {
        char buf[64];
        const auto r = std::to_chars(buf, buf + sizeof buf, *n);
        return std::string(buf, r.ptr);
      }
      return {};
    case kind::choice: {
      const auto s = stated_answer(answer_text);
      for (std::size_t i = 0; i < s.size(); ++i)
        if ((s[i] >= 'A' && s[i] <= 'Z') && (i == 0 || !letter(s[i - 1])) &&
            (i + 1 == s.size() || !letter(s[i + 1])))
          return std::string(1, s[i]);
      return {};
    }
    case kind::regex: {
      std::match_results<std::string_view::const_iterator> m;
      if (std::regex_search(answer_text.begin(), answer_text.end(), m, pattern_)) return m.str();
      return {};
    }
  }
  return {};
}

grader::verdict grader::judge(std::string_view content) const {
  verdict v;
  v.extracted = extract(content);
  if (kind_ == kind::numeric) {
    double n = 0;
    const auto r = std::from_chars(v.extracted.data(), v.extracted.data() + v.extracted.size(), n);
    v.correct = !v.extracted.empty() && r.ec == std::errc() &&
                std::fabs(n - number_) <= 1e-6 * std::max(1.0, std::fabs(number_));
  } else if (kind_ == kind::regex) {
    v.correct =
        !v.extracted.empty() || std::regex_search(std::string(after_reasoning(content)), pattern_);
  } else {
    v.correct = !v.extracted.empty() && v.extracted == expected_;
  }
  return v;
}

}  // namespace tokentap::bench
