#pragma once
// How a graded task's response is judged (DESIGN.md §14): the answer is taken from the text
// after the reasoning, and compared with the task's `answer` by its `grader` — exact, numeric,
// choice or regex.  Pure: text in, verdict out.
#include <optional>
#include <regex>
#include <string>
#include <string_view>

namespace tokentap::bench {

/// The text after a model's reasoning: what follows the last `</think>` (models that write
/// their reasoning into the content), else the whole text.  A reasoning channel of its own
/// (`reasoning_content`, Anthropic's thinking blocks) never reaches the grader: the tap keeps
/// the two apart.
std::string_view after_reasoning(std::string_view content) noexcept;

/// The answer a response states: the last `\boxed{...}`; else what follows the last "answer
/// is" / "answer:" (any case) up to the end of its line; else the last non-empty line.  Trimmed
/// of spaces, `*`, `$` and one closing `.`.
std::string_view stated_answer(std::string_view text) noexcept;

class grader {
 public:
  enum class kind { exact, numeric, choice, regex };
  /// `kind_name`: exact | numeric | choice | regex; `expected`: the task's answer (a number for
  /// numeric, one letter A–Z for choice, an ECMAScript pattern for regex).  nullopt with
  /// `error` set when either is not what the kind takes.
  static std::optional<grader> make(std::string_view kind_name, std::string_view expected,
                                    std::string& error);

  struct verdict {
    bool correct = false;
    std::string extracted;  ///< what was compared (the stated answer, its number or letter)
  };
  /// Judges the response's answer text (content; its reasoning is cut here too):
  /// - exact: the stated answer equals the expected one, case, spacing and a closing period
  ///   aside;
  /// - numeric: the stated answer's last number equals the expected one (to 1e-6 of it;
  ///   thousands separators allowed);
  /// - choice: the stated answer's first stand-alone capital letter (`B`, `(B)`, `B)`) is the
  ///   expected one;
  /// - regex: the pattern is found anywhere in the text after the reasoning.
  verdict judge(std::string_view content) const;
  /// What judge() compares of a text (after its reasoning): the normalized stated answer, its
  /// last number, its letter, or the pattern's match; empty when it states none.  Two texts
  /// that extract alike say the same thing (a conclusion step and the final answer).
  std::string extract(std::string_view text) const;

  kind which() const noexcept { return kind_; }

 private:
  kind kind_ = kind::exact;
  std::string expected_;
  double number_ = 0;
  std::regex pattern_;
};

/// The last number written in `text` (`-1,234.5`, `3e8`), or nullopt.
std::optional<double> last_number(std::string_view text) noexcept;

}  // namespace tokentap::bench
