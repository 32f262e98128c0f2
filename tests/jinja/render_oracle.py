#!/usr/bin/env python3
"""Renders a chat template for each conversation with Python's jinja2, set up the way transformers'
apply_chat_template sets it up (utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
the globals raise_exception and strftime_now, and the tojson filter replaced by json.dumps with
ensure_ascii=False. transformers itself is not imported.

Usage: render_oracle.py TEMPLATE CONVERSATIONS_JSON
Prints a JSON list, one entry per conversation: {"ok": true, "text": ...} or
{"ok": false, "error": ...}. Exits 77 when jinja2 cannot be imported."""
import json
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("render_oracle: python3 has no jinja2", file=sys.stderr)
    sys.exit(77)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        source = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        conversations = json.load(f)["conversations"]
    template = environment().from_string(source)
    results = []
    for conversation in conversations:
        try:
            results.append({"ok": True, "text": template.render(**conversation["context"])})
        except Exception as e:  # any failure is an error the C++ side must also report
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
