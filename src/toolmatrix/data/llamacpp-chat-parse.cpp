// toolmatrix-chat-parse: llama-server's own output parsing, without a model, for toolmatrix's parser replay.
//
// Built in llama.cpp's CMake tree beside llama-server and linked against the same server-context library
// (llamacpp-chat-parse.cmake), so every step below is the server's code at the built version:
//   - server settings: common_params_parse of "llama-server --jinja" (the defaults the live tier runs with), the
//     template through common_chat_templates_init with the BOS and EOS strings the request gives (what load_model
//     passes there from a GGUF's vocabulary: chat.cpp common_chat_templates_init, server-context.cpp:1588), thinking
//     on where the template supports it (server-context.cpp load_model);
//   - per request: oaicompat_chat_params_parse renders the template with the request's tools and gives the chat
//     format, the PEG parser and the generation prompt; eval_llama_cmpl_schema turns those into the task's
//     chat_parser_params (only the token-level fields, which need a vocabulary, are left out: they steer sampling,
//     not parsing);
//   - whole answer: task_result_state::update_chat_msg(text, is_partial=false), the message as
//     common_chat_msg::to_json_oaicompat writes it;
//   - stream: update_chat_msg(piece, is_partial=true) per piece, then "" with is_partial=false (stream mode's final
//     result carries no text), each diff written by server_chat_msg_diff_to_json_oaicompat.
// No model means no tokenizer, and no add_bos/add_eos flags (the template's leading BOS is kept in the prompt; the
// generation prompt and the parser do not change with it).
//
// Protocol: one JSON object per line on stdin, one answer per line on stdout, in order.
//   -> {"template": {"source": JINJA, "bos_token": S, "eos_token": S} (the chat template and the vocabulary's
//       BOS/EOS strings; absent: ""), "tools": [...], "chat_template_kwargs": {...} (the request's, as a client sends
//       them; absent or empty: the server's default), then one of
//       "text": S            <- {"content", "reasoning", "tool_calls": [{"id", "name", "arguments"}]}
//       "pieces": [S, ...]   <- {"deltas": [DELTA, ...]}  (OpenAI stream deltas, as the server writes them)
//       "probe": true        <- {"format": CHAT_FORMAT_NAME, "preserved_tokens": [S, ...], "grammar_triggers": [...]}
//                               (what the template with these tools gives; the server keeps a preserved token only
//                               where the vocabulary has it as one token, server-schema.cpp:341-350)
//   <- {"unsupported": S}   the template does not load: llama-server would not start with it
//    | {"error": S}         the server's code threw (a bad request, or its parser on this text)
// An exception never ends the process: it is that line's answer.

#include "arg.h"
#include "chat.h"
#include "common.h"
#include "log.h"
#include "server-chat.h"
#include "server-common.h"
#include "server-schema.h"
#include "server-task.h"

#include <iostream>
#include <map>
#include <memory>
#include <string>

namespace {

// Token-level fields of the server's request schema: they need a vocabulary (server-schema.cpp asserts one) and
// only steer sampling (grammar triggers, reasoning budget, logit bias); the parser never reads them.
const char * const TOKEN_FIELDS[] = {
    "preserved_tokens", "grammar_triggers", "reasoning_budget_start_tag", "reasoning_budget_end_tags",
    "reasoning_budget_end_tag", "reasoning_budget_message", "logit_bias", "ignore_eos",
};

// What the server derives for one request: the task's parser params, and the token-level fields the probe reports.
struct request_params {
    common_chat_parser_params parser;
    json                      preserved_tokens;
    json                      grammar_triggers;
};

struct server_settings {
    common_params params;
    std::map<std::string, std::shared_ptr<server_chat_params>> templates;  // by template (source, BOS, EOS)
    std::map<std::string, request_params> parsers;  // by (template, tools, thinking, stream)
};

// The server's chat settings for one template, as load_model builds them from a GGUF: its chat template and its
// vocabulary's BOS/EOS strings (common_token_to_piece of llama_vocab_bos/eos, chat.cpp common_chat_templates_init).
std::shared_ptr<server_chat_params> chat_settings(server_settings & server, const json & tmpl) {
    const std::string key = tmpl.dump();
    auto found = server.templates.find(key);
    if (found != server.templates.end()) {
        return found->second;
    }
    const std::string source = tmpl.value("source", "");
    if (source.empty()) {  // without a model, init would assert on it
        throw std::runtime_error("no chat template source");
    }
    const common_params & base = server.params;
    auto tmpls = common_chat_templates_init(/* model= */ nullptr, source, tmpl.value("bos_token", ""),
                                            tmpl.value("eos_token", ""));
    const bool thinking = base.use_jinja && base.enable_reasoning != 0
        && common_chat_templates_support_enable_thinking(tmpls.get());
    auto settings = std::make_shared<server_chat_params>(server_chat_params{
        /* use_jinja          */ base.use_jinja,
        /* prefill_assistant  */ base.prefill_assistant,
        /* reasoning_format   */ base.reasoning_format,
        /* chat_template_kwargs */ base.default_template_kwargs,
        /* tmpls              */ std::move(tmpls),
        /* allow_image        */ false,
        /* allow_audio        */ false,
        /* allow_video        */ false,
        /* enable_thinking    */ thinking,
        /* reasoning_budget   */ base.sampling.reasoning_budget_tokens,
        /* reasoning_budget_msg */ base.sampling.reasoning_budget_message,
        /* media_path         */ base.media_path,
        /* force_pure_content */ base.force_pure_content_parser,
    });
    server.templates[key] = settings;
    return settings;
}

// The task's parser params for a chat request with these tools, derived once per key.
const request_params & parser_params(server_settings & server, const json & req, bool stream) {
    const json & tmpl = req.at("template");
    const json tools = req.value("tools", json::array());
    const json kwargs = req.value("chat_template_kwargs", json::object());
    const std::string key = tmpl.dump() + '\n' + tools.dump() + '\n' + kwargs.dump() + (stream ? "\ns" : "\nn");
    auto found = server.parsers.find(key);
    if (found != server.parsers.end()) {
        return found->second;
    }
    json user = json::object();
    user["role"]    = "user";
    user["content"] = "replay";
    json body = json::object();
    body["messages"] = json::array();
    body["messages"].push_back(user);
    body["tool_choice"] = "auto";
    body["stream"]      = stream;
    if (!tools.empty()) {
        body["tools"] = tools;
    }
    if (!kwargs.empty()) {
        body["chat_template_kwargs"] = kwargs;
    }
    std::vector<raw_buffer> files;
    json llama_params = oaicompat_chat_params_parse(body, *chat_settings(server, tmpl), files);
    request_params derived{{}, llama_params.value("preserved_tokens", json::array()),
                           llama_params.value("grammar_triggers", json::array())};
    for (const char * field : TOKEN_FIELDS) {
        llama_params.erase(field);
    }
    const std::vector<llama_logit_bias> no_eog;
    derived.parser = server_schema::eval_llama_cmpl_schema(nullptr, server.params, no_eog, llama_params)
                         .chat_parser_params;
    return server.parsers.emplace(key, std::move(derived)).first->second;
}

json error_of(const std::exception & e) {
    return {{"error", std::string(e.what()).substr(0, 500)}};
}

json message_of(const common_chat_msg & msg) {
    const json oai = msg.to_json_oaicompat();
    json calls = json::array();
    for (const auto & call : oai.value("tool_calls", json::array())) {
        calls.push_back({{"id", call.value("id", "")}, {"name", call.at("function").value("name", "")},
                         {"arguments", call.at("function").value("arguments", "")}});
    }
    return {{"content", oai.value("content", json())}, {"reasoning", oai.value("reasoning_content", json())},
            {"tool_calls", calls}};
}

// The non-streamed answer: the whole text, parsed once as final.
json whole(const common_chat_parser_params & params, const std::string & text) {
    task_result_state state(params);
    std::vector<common_chat_msg_diff> diffs;
    return message_of(state.update_chat_msg(text, /* is_partial= */ false, diffs));
}

// The stream: each piece parsed as partial, then the final result (no text of its own in stream mode).
json streamed(const common_chat_parser_params & params, const json & pieces) {
    task_result_state state(params);
    json deltas = json::array();
    auto update = [&](const std::string & text, bool is_partial) {
        std::vector<common_chat_msg_diff> diffs;
        state.update_chat_msg(text, is_partial, diffs);
        for (const auto & diff : diffs) {
            deltas.push_back(server_chat_msg_diff_to_json_oaicompat(diff));
        }
    };
    for (const auto & piece : pieces) {
        update(piece.get<std::string>(), true);
    }
    update("", false);
    return {{"deltas", deltas}};
}

json answer(server_settings & server, const std::string & line) {
    json req;
    try {
        req = json::parse(line);
        if (!req.at("template").is_object()) {
            throw std::runtime_error("template: an object {source, bos_token, eos_token}");
        }
    } catch (const std::exception & e) {
        return error_of(e);
    }
    try {
        chat_settings(server, req.at("template"));
    } catch (const std::exception & e) {
        return {{"unsupported", std::string(e.what()).substr(0, 500)}};
    }
    try {
        const bool stream = req.contains("pieces");
        const request_params & derived = parser_params(server, req, stream);
        if (req.value("probe", false)) {
            return {{"format", common_chat_format_name(derived.parser.format)},
                    {"preserved_tokens", derived.preserved_tokens}, {"grammar_triggers", derived.grammar_triggers}};
        }
        const common_chat_parser_params & params = derived.parser;
        return stream ? streamed(params, req.at("pieces")) : whole(params, req.value("text", ""));
    } catch (const std::exception & e) {
        return error_of(e);
    }
}

}  // namespace

int main(int argc, char ** argv) {
    common_init();
    // The live tier's llama-server runs with --jinja and its defaults otherwise; extra arguments pass through.
    std::vector<std::string> args = {"llama-server", "--jinja"};
    for (int i = 1; i < argc; ++i) {
        args.emplace_back(argv[i]);
    }
    std::vector<char *> server_argv;
    for (auto & arg : args) {
        server_argv.push_back(arg.data());
    }
    server_settings server;
    if (!common_params_parse(static_cast<int>(server_argv.size()), server_argv.data(), server.params,
                             LLAMA_EXAMPLE_SERVER)) {
        return 2;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            continue;
        }
        std::cout << answer(server, line).dump_safe() << '\n' << std::flush;
    }
    return 0;
}
