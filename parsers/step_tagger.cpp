#include "parsers/step_tagger.hpp"

#include <algorithm>
#include <cctype>

namespace tokentap::parsers {

std::string_view to_string(step_kind k) noexcept {
  switch (k) {
    case step_kind::step:
      return "step";
    case step_kind::conclusion:
      return "conclusion";
    case step_kind::verification:
      return "verification";
    case step_kind::backtrack:
      return "backtrack";
    case step_kind::other:
      return "other";
  }
  return "other";
}

step_triggers step_triggers::defaults() {
  step_triggers t;
  t.step = {"First",   "Firstly", "Second", "Secondly", "Third", "Thirdly", "Next",   "Then",
            "Finally", "Now",     "首先",   "其次",     "然后",  "接着",    "接下来", "最后"};
  t.conclusion = {"Therefore",    "Thus",          "Hence",   "So",   "In summary",
                  "To summarize", "In conclusion", "Overall", "因此", "所以",
                  "综上所述",     "综上",          "总之",    "故"};
  t.verification = {"Let me check", "Let me verify", "Let me double-check", "Double-check",
                    "Check",        "Verify",        "Verification",        "验证",
                    "检查",         "检验"};
  t.backtrack = {"Wait", "But wait", "Actually", "Hmm",  "Hold on",
                 "Oops", "No,",      "等等",     "不对", "等一下"};
  return t;
}

namespace {

constexpr std::size_t max_step_text = 8192;  // bytes of a step kept for the redundancy check
constexpr std::size_t max_compared = 64;     // most recent steps looked at per shared trigram
constexpr std::size_t min_lookahead = 64;
constexpr std::size_t max_step_numerals = 8;  // 第…步: 8 numerals x 3 bytes + 6 < min_lookahead

struct trigger {
  std::string text;
  step_kind kind;
  bool needs_follower;  // English: must be followed by space , : . ! or end of text
};

enum class verdict { undecided, none, match };

struct decision {
  verdict v = verdict::none;
  step_kind kind = step_kind::other;
};

// Decodes the UTF-8 code point at s[i]; returns its length (1 for an invalid byte).
std::size_t decode(std::string_view s, std::size_t i, char32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80             ? 1
                  : (c & 0xE0) == 0xC0 ? 2
                  : (c & 0xF0) == 0xE0 ? 3
                  : (c & 0xF8) == 0xF0 ? 4
                                       : 1;
  if (i + n > s.size()) return 0;  // incomplete
  cp = n == 1 ? c : c & (0xFF >> (n + 1));
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return n;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// ASCII that is neither whitespace nor sentence punctuation: it never changes where a step may
// start.
bool plain(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > ' ' && u < 0x80 && c != '.' && c != '?' && c != '!';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Rule 3 list/step markers at a line start: `1.`..`99.` / `1)` + whitespace, `-` `*` `•` +
// whitespace, `(1)`, `Step N`, `第N步`.  Returns match length, 0 for no, -1 for "need more bytes".
int marker(std::string_view s, bool eof) {
  auto need = [&](std::size_t i) { return i >= s.size(); };
  const auto undecided = eof ? 0 : -1;
  if (s.empty()) return undecided;
  if (s[0] == '-' || s[0] == '*') {
    if (need(1)) return undecided;
    return is_space(s[1]) ? 2 : 0;
  }
  if (s.starts_with("\xE2\x80\xA2")) {  // •
    if (need(3)) return undecided;
    return is_space(s[3]) ? 4 : 0;
  }
  if (s.size() < 3 && std::string_view("\xE2\x80\xA2").starts_with(s)) return undecided;
  if (is_digit(s[0])) {
    std::size_t i = 1;
    if (need(i)) return undecided;
    if (is_digit(s[i])) ++i;
    if (need(i)) return undecided;
    if (s[0] == '0' && i == 1) return 0;
    if (s[i] != '.' && s[i] != ')') return 0;
    if (need(i + 1)) return undecided;
    return is_space(s[i + 1]) ? static_cast<int>(i + 2) : 0;
  }
  if (s[0] == '(') {
    std::size_t i = 1;
    while (!need(i) && is_digit(s[i]) && i < 4) ++i;
    if (need(i)) return undecided;
    return i > 1 && s[i] == ')' ? static_cast<int>(i + 1) : 0;
  }
  constexpr std::string_view step_word = "Step ";
  if (s.size() <= step_word.size()) {
    if (step_word.starts_with(s)) return undecided;
  } else if (s.starts_with(step_word)) {
    return is_digit(s[step_word.size()]) ? static_cast<int>(step_word.size() + 1) : 0;
  }
  constexpr std::string_view di = "\xE7\xAC\xAC";  // 第
  constexpr std::string_view bu = "\xE6\xAD\xA5";  // 步
  if (s.size() < di.size()) return di.starts_with(s) ? undecided : 0;
  if (!s.starts_with(di)) return 0;
  std::size_t i = di.size();
  std::size_t numerals = 0;
  for (;;) {
    // A step number has a few numerals; bounding the run keeps the decision inside the
    // lookahead window, so it never depends on how the text was split (found by
    // fuzz_step_tagger: 第 + 120 digits + 二步 matched only when it arrived whole).
    if (numerals > max_step_numerals) return 0;
    if (need(i)) return undecided;
    if (is_digit(s[i])) {
      ++i;
      ++numerals;
      continue;
    }
    char32_t cp = 0;
    const auto n = decode(s, i, cp);
    if (n == 0) return undecided;
    static constexpr std::u32string_view cn = U"一二三四五六七八九十";
    if (cn.find(cp) != std::u32string_view::npos) {
      i += n;
      ++numerals;
      continue;
    }
    if (numerals > 0 && s.substr(i).starts_with(bu)) return static_cast<int>(i + bu.size());
    if (numerals > 0 && s.size() - i < bu.size() && bu.starts_with(s.substr(i))) return undecided;
    return 0;
  }
}

bool is_cjk_punct(char32_t cp) {
  return (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0xFF00 && cp <= 0xFF0F) ||
         (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
         (cp >= 0xFF5B && cp <= 0xFF65) || (cp >= 0x2010 && cp <= 0x2027);
}

std::uint64_t fnv(std::string_view s, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Trigram set of a step's normalized text: lowercased, punctuation removed, whitespace collapsed;
// word trigrams, or character trigrams for Chinese/Japanese/Korean (each such character is a
// unit).  Units are hashed as they are scanned, so this allocates nothing once `units` and `out`
// are warm.
void trigrams(std::string_view text, std::vector<std::uint64_t>& units,
              std::vector<std::uint64_t>& out) {
  constexpr std::uint64_t basis = 14695981039346656037ull, prime = 1099511628211ull;
  units.clear();
  out.clear();
  std::uint64_t h = basis;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) units.push_back(h);
    h = basis;
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      const bool upper = c >= 'A' && c <= 'Z';
      if (upper || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
        h = (h ^ static_cast<unsigned char>(upper ? c + 32 : c)) * prime;
        in_word = true;
      } else {
        end_word();  // whitespace and ASCII punctuation separate words
      }
      ++i;
      continue;
    }
    char32_t cp = 0;
    const auto n = decode(text, i, cp);
    if (n == 0) break;
    if (is_cjk_punct(cp)) {
      end_word();
    } else if (cp >= 0x2E80) {
      end_word();
      units.push_back(fnv(text.substr(i, n)));
    } else {
      for (std::size_t k = 0; k < n; ++k) h = (h ^ static_cast<unsigned char>(text[i + k])) * prime;
      in_word = true;
    }
    i += n;
  }
  end_word();
  if (units.empty()) return;
  auto mix = [](std::uint64_t a, std::uint64_t b) {
    return (a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2))) * 0xff51afd7ed558ccdull;
  };
  if (units.size() < 3) {
    std::uint64_t g = units.size();
    for (auto u : units) g = mix(g, u);
    out.push_back(g);
    return;
  }
  for (std::size_t i = 0; i + 2 < units.size(); ++i)
    out.push_back(mix(mix(mix(3, units[i]), units[i + 1]), units[i + 2]));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace

// The trigger set in searchable form: built once per configuration and shared by every stream's
// taggers (building it per stream cost more than tagging a short answer).
struct step_tagger::compiled {
  std::vector<trigger> triggers;  // longest first
  std::size_t lookahead = min_lookahead;
  std::array<bool, 256> first_byte{};  // bytes some trigger starts with
  std::array<std::vector<std::uint16_t>, 256>
      by_first;  // trigger indices by first byte, longest first
};

struct alignas(64) step_tagger::impl {
  impl(std::shared_ptr<const compiled> c, std::size_t max) : max_steps(max), set(std::move(c)) {}

  // Ordered by use: what every delta touches fills the first three cache lines (with hundreds of
  // open streams each further line of a stream's state is another miss per token).
  bool finished = false;
  // Scanner state (STEPS.md rules 1-4).
  bool text_start = true, after_blank = false, line_start = true, line_has_content = false;
  bool sentence_start = false, sent_punct = false, checked = false;
  std::size_t pos = 0;  // cursor in buf
  std::uint64_t buf_offset = 0;
  std::uint64_t total = 0;  // bytes fed
  std::string buf;          // bytes not yet consumed (buf[0] is at global offset buf_offset)
  std::vector<std::pair<std::uint64_t, std::int64_t>>
      deltas;  // (start offset, t_ns) not yet attributed
  std::size_t delta_head = 0;
  std::vector<step> steps;
  std::size_t max_steps;
  std::shared_ptr<const compiled> set;
  std::string cur_text;
  std::uint32_t pre_tokens = 0;  // tokens before the first step
  std::int64_t pre_t = -1;
  std::uint64_t redundant_tokens = 0;

  // Redundancy index: trigram -> finished steps containing it, and each step's trigram count.
  // A new step touches only the steps it shares a trigram with (not every earlier step).  Flat
  // open-addressing table + linked entries: no allocation per trigram, only amortized growth.
  struct posting {
    std::uint64_t gram;
    std::uint32_t step;
    std::uint32_t next;  // next posting of the same gram, or npos
  };
  static constexpr std::uint32_t npos = 0xFFFFFFFFu;
  std::vector<std::uint32_t> table;  // gram -> head posting; allocated with the first step
  std::vector<posting> postings;
  std::vector<std::uint32_t> gram_count;
  std::vector<std::uint64_t> g, units;  // scratch
  std::vector<std::uint32_t> shared;    // scratch: trigrams shared with step i
  std::vector<std::uint32_t> touched;   // scratch: steps with shared[i] > 0

  decision classify(std::string_view s, bool eof, bool markers) const {
    // Most sentence starts begin with a byte no trigger or marker begins with.
    const auto b0 = static_cast<unsigned char>(s[0]);
    if (!set->first_byte[b0] && !(markers && (b0 == '-' || b0 == '*' || b0 == '(' || b0 == 0xE2 ||
                                              b0 == 0xE7 || b0 == 'S' || (b0 >= '0' && b0 <= '9'))))
      return {verdict::none, step_kind::other};
    int best = 0;
    step_kind kind = step_kind::other;
    bool maybe = false;
    for (const auto idx : set->by_first[b0]) {
      const auto& t = set->triggers[idx];
      if (s.size() >= t.text.size()) {
        if (s.compare(0, t.text.size(), t.text) != 0) continue;
        bool ok;
        if (!t.needs_follower) {
          ok = true;
        } else if (s.size() > t.text.size()) {
          const char f = s[t.text.size()];
          ok = is_space(f) || f == ',' || f == ':' || f == '.' || f == '!';
        } else {
          ok = eof;
          if (!eof) maybe = true;
        }
        if (ok && static_cast<int>(t.text.size()) > best) {
          best = static_cast<int>(t.text.size());
          kind = t.kind;
        }
      } else if (!eof && std::string_view(t.text).starts_with(s)) {
        maybe = true;
      }
    }
    if (markers) {
      const int m = marker(s, eof);
      if (m < 0) maybe = true;
      if (m > best) {
        best = m;
        kind = step_kind::step;
      }
    }
    if (maybe && s.size() < set->lookahead) return {verdict::undecided, kind};
    return {best > 0 ? verdict::match : verdict::none, kind};
  }

  std::uint32_t* slot_of(std::uint64_t gram) {
    std::size_t mask = table.size() - 1,
                i = static_cast<std::size_t>(gram * 0x9e3779b97f4a7c15ull) & mask;
    while (table[i] != npos && postings[table[i]].gram != gram) i = (i + 1) & mask;
    return &table[i];
  }

  void grow_table() {
    std::vector<std::uint32_t> old(std::max<std::size_t>(256, table.size() * 2), npos);
    old.swap(table);
    for (auto head : old)
      if (head != npos) *slot_of(postings[head].gram) = head;
  }

  // `last`: no step follows (the response ended).  The last step is still compared with the
  // earlier ones, but its trigrams are not indexed — nothing would look them up (at a stream's
  // end that indexing, and the table's growth, were most of the tagger's cost).
  void close_step(bool last = false) {
    if (steps.empty()) return;
    if (last && postings.empty()) {  // no earlier step had a trigram: nothing to repeat
      cur_text.clear();
      return;
    }
    trigrams(cur_text, units, g);
    auto& st = steps.back();
    const auto id = static_cast<std::uint32_t>(gram_count.size());
    shared.resize(gram_count.size() + 1, 0);
    touched.clear();
    for (auto h : g) {
      if (!last && (postings.size() + 1) * 2 > table.size()) grow_table();
      auto* head = slot_of(h);
      std::size_t seen = 0;
      for (auto p = *head; p != npos && seen < max_compared; p = postings[p].next, ++seen) {
        const auto other = postings[p].step;
        if (shared[other]++ == 0) touched.push_back(other);
      }
      if (last) continue;
      postings.push_back({h, id, *head});
      *head = static_cast<std::uint32_t>(postings.size() - 1);
    }
    for (auto other : touched) {
      const double common = shared[other];
      const double uni = static_cast<double>(g.size() + gram_count[other]) - common;
      if (!st.redundant && uni > 0 && common / uni >= 0.8) st.redundant = true;
      shared[other] = 0;
    }
    gram_count.push_back(static_cast<std::uint32_t>(g.size()));
    if (st.redundant) redundant_tokens += st.tokens;
    cur_text.clear();
  }

  void open_step(std::uint64_t offset, step_kind kind) {
    if (steps.size() >= max_steps) return;
    close_step();
    step s;
    s.offset = offset;
    s.kind = kind;
    s.t_ns = t_at(offset);
    s.end_ns = s.t_ns;
    if (steps.empty()) {
      s.tokens = pre_tokens;  // leading whitespace-only tokens belong to the first step
      pre_tokens = 0;
    }
    steps.push_back(s);
  }

  // Arrival time of the delta containing global offset `off`.
  std::int64_t t_at(std::uint64_t off) const {
    std::int64_t t = 0;
    for (std::size_t i = 0; i < deltas.size(); ++i) {
      if (deltas[i].first > off) break;
      t = deltas[i].second;
    }
    return t;
  }

  // Credits every delta starting at or before global offset `off` to the current step.
  void attribute(std::uint64_t off) {
    while (delta_head < deltas.size() && deltas[delta_head].first <= off) {
      if (steps.empty() || steps.size() >= max_steps) {
        if (steps.empty()) ++pre_tokens;
      } else {
        ++steps.back().tokens;
        steps.back().end_ns = deltas[delta_head].second;
      }
      ++delta_head;
    }
  }

  // Scans s from cursor p (s[0] is at global offset base) until its end or a decision that
  // needs more text; returns where it stopped.
  std::size_t scan(std::string_view s, std::size_t p, std::uint64_t base, bool eof) {
    while (p < s.size()) {
      const std::uint64_t off = base + p;
      const char c = s[p];
      if (c == ' ') {
        // The commonest byte between words: no step starts at it, it is never a delta's first
        // non-blank character, and all it changes is a sentence's start after its punctuation.
        if (!steps.empty() && cur_text.size() < max_step_text) cur_text.push_back(' ');
        if (sent_punct) sentence_start = true;
        sent_punct = false;
        ++p;
        checked = false;
        continue;
      }
      if (!is_space(c) && !checked) {
        const int strength = (text_start || after_blank) ? 2
                             : line_start                ? 1
                             : sentence_start            ? 0
                                                         : -1;
        if (strength >= 0) {
          const auto d = classify(s.substr(p), eof, strength >= 1);
          if (d.v == verdict::undecided) return p;  // hold back: need more text to decide
          if (d.v == verdict::match || strength == 2)
            open_step(off, d.v == verdict::match ? d.kind : step_kind::other);
        }
        checked = true;
      }
      if (plain(c)) {
        // Fast path: a run of plain ASCII (no whitespace, no sentence punctuation) can hold no
        // possible step start after its first byte, so it is consumed in one go.
        std::size_t j = p + 1;
        while (j < s.size() && plain(s[j])) ++j;
        const std::size_t len = j - p;
        attribute(off + len - 1);
        if (!steps.empty() && cur_text.size() < max_step_text) cur_text.append(s.data() + p, len);
        text_start = after_blank = line_start = sentence_start = sent_punct = false;
        line_has_content = true;
        p = j;
        checked = false;
        continue;
      }
      char32_t cp = 0;
      const auto n = decode(s, p, cp);
      if (n == 0) {
        if (!eof) return p;  // a character split across deltas
        cp = 0xFFFD;
      }
      const std::size_t len = n == 0 ? s.size() - p : n;
      // A delta belongs to the step holding its first non-whitespace character (leading blank
      // lines go with the step they introduce).
      if (!is_space(c)) attribute(off + len - 1);
      if (!steps.empty() && cur_text.size() < max_step_text) cur_text.append(s.data() + p, len);
      advance(cp);
      p += len;
      checked = false;
    }
    return p;
  }

  // One delta, appended to the text at global offset `total` (before it).  With nothing held
  // back — nearly every delta — it is scanned where it is, and only an undecided rest is kept.
  void feed(std::string_view text, std::int64_t t_ns) {
    deltas.emplace_back(total, t_ns);
    total += text.size();
    if (!buf.empty()) {
      buf.append(text);
      return process(false);
    }
    const auto used = scan(text, 0, buf_offset, false);
    buf_offset += used;
    if (used < text.size()) {
      buf.assign(text.substr(used));
      pos = 0;
    }
    drop_attributed_deltas();
  }

  void process(bool eof) {
    pos = scan(buf, pos, buf_offset, eof);
    // Drop what was consumed (amortized: only once the consumed prefix is large).
    if (pos > 4096 || pos == buf.size()) {
      buf.erase(0, pos);
      buf_offset += pos;
      pos = 0;
      drop_attributed_deltas();
    }
  }

  // Keeps the last attributed delta: later offsets inside it still need its timestamp.
  void drop_attributed_deltas() {
    if (delta_head <= 1) return;
    if (delta_head == deltas.size()) {  // every delta attributed (the usual case): keep the last
      deltas.front() = deltas.back();
      deltas.resize(1);
    } else {
      deltas.erase(deltas.begin(), deltas.begin() + static_cast<long>(delta_head - 1));
    }
    delta_head = 1;
  }

  void advance(char32_t cp) {
    if (cp == '\n') {
      if (!line_has_content && !text_start) after_blank = true;
      line_start = true;
      line_has_content = false;
      sent_punct = false;
    } else if (cp == ' ' || cp == '\t' || cp == '\r') {
      if (sent_punct) sentence_start = true;
      sent_punct = false;
    } else {
      text_start = after_blank = line_start = sentence_start = sent_punct = false;
      line_has_content = true;
      if (cp == '.' || cp == '?' || cp == '!')
        sent_punct = true;
      else if (cp == 0x3002 || cp == 0xFF1F || cp == 0xFF01 || cp == 0xFF1B)
        sentence_start = true;  // 。？！；
    }
  }
};

std::shared_ptr<const step_tagger::compiled> step_tagger::compile(const step_triggers& t) {
  auto c = std::make_shared<compiled>();
  auto add = [&](const std::vector<std::string>& list, step_kind k) {
    for (const auto& s : list) {
      if (s.empty()) continue;
      const bool ascii = static_cast<unsigned char>(s[0]) < 0x80;
      c->triggers.push_back({s, k, ascii && s.back() != ','});
      c->first_byte[static_cast<unsigned char>(s[0])] = true;
      c->lookahead = std::max(c->lookahead, s.size() + 2);
    }
  };
  add(t.step, step_kind::step);
  add(t.conclusion, step_kind::conclusion);
  add(t.verification, step_kind::verification);
  add(t.backtrack, step_kind::backtrack);
  std::stable_sort(c->triggers.begin(), c->triggers.end(), [](const trigger& a, const trigger& b) {
    return a.text.size() > b.text.size();
  });
  for (std::size_t i = 0; i < c->triggers.size(); ++i)
    c->by_first[static_cast<unsigned char>(c->triggers[i].text[0])].push_back(
        static_cast<std::uint16_t>(i));
  return c;
}

step_tagger::step_tagger(const step_triggers& t, std::size_t max_steps)
    : step_tagger(compile(t), max_steps) {}

step_tagger::step_tagger(std::shared_ptr<const compiled> triggers, std::size_t max_steps)
    : impl_(std::make_unique<impl>(std::move(triggers), max_steps)) {}

step_tagger::~step_tagger() = default;
step_tagger::step_tagger(step_tagger&&) noexcept = default;
step_tagger& step_tagger::operator=(step_tagger&&) noexcept = default;

void step_tagger::feed(std::string_view text, std::int64_t t_ns) {
  auto& d = *impl_;
  if (text.empty() || d.finished) return;
  d.feed(text, t_ns);
}

void step_tagger::finish() {
  auto& d = *impl_;
  if (d.finished) return;
  d.process(true);
  d.attribute(~0ull);
  d.close_step(/*last=*/true);
  d.finished = true;
}

const std::vector<step>& step_tagger::steps() const noexcept {
  return impl_->steps;
}
std::uint64_t step_tagger::redundant_tokens() const noexcept {
  return impl_->redundant_tokens;
}
std::uint64_t step_tagger::text_bytes() const noexcept {
  return impl_->total;
}

void step_tagger::add_hot_lines(hot_lines& l) const noexcept {
  const auto& d = *impl_;
  // The scanner's fields through the current step's text, then where the next delta goes.
  l.add_range(&d, &d.cur_text + 1);
  l.add(d.deltas.data(), (d.deltas.size() + 1) * sizeof d.deltas[0]);
  if (!d.buf.empty()) l.add(d.buf.data(), d.buf.size());
  if (!d.steps.empty()) l.add(&d.steps.back(), sizeof d.steps.back());
  if (!d.cur_text.empty()) l.add(d.cur_text.data() + d.cur_text.size() - 1);
}

}  // namespace tokentap::parsers
