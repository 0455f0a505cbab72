#include "parsers/model_rewrite.hpp"

#include <simdjson.h>

#include "base/json.hpp"

namespace tokentap::parsers {

std::optional<std::string> with_model(std::string_view body, std::string_view model) {
  // Validate the whole body on a DOM; find the value's bytes with the on-demand parser, whose
  // raw token points into the (padded) copy at the offsets of `body`.
  {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS || !doc.is_object())
      return std::nullopt;
  }
  const simdjson::padded_string padded(body);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object top;
  simdjson::ondemand::value value;
  simdjson::ondemand::json_type type;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(top) != simdjson::SUCCESS ||
      top.find_field_unordered("model").get(value) != simdjson::SUCCESS ||
      value.type().get(type) != simdjson::SUCCESS || type != simdjson::ondemand::json_type::string)
    return std::nullopt;
  std::string_view token = value.raw_json_token();
  while (!token.empty() && token.back() != '"') token.remove_suffix(1);  // (trailing spaces)
  const auto at = static_cast<std::size_t>(token.data() - padded.data());
  std::string out;
  out.reserve(body.size() + model.size() + 2);
  out.append(body.substr(0, at));
  base::json::append_string(out, model);
  out.append(body.substr(at + token.size()));
  return out;
}

}  // namespace tokentap::parsers
