// Python's str methods the templates call, on UTF-8 text (case mapping is ASCII-only).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvactor::jinja {

// str.strip/lstrip/rstrip: `chars` null strips Python's whitespace (Unicode spaces included).
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit); a null sep splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string replace_all(std::string_view s, std::string_view from, std::string_view to,
                        int64_t count);
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
// str.title() (Python) and Jinja2's title filter (words start after spaces, '-', brackets).
std::string python_title(std::string_view s);
std::string jinja_title(std::string_view s);
std::string capitalize(std::string_view s);

} // namespace kvactor::jinja
