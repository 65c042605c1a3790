// llama.cpp has no parser API of its own: llama-server parses a model's answer with the PEG parser it derives from
// the chat template. This program calls the server's own code on the text below, with no model: the settings of
// `llama-server --jinja --chat-template-file TEMPLATE` (common_params_parse, common_chat_templates_init), the chat
// request with the tools (oaicompat_chat_params_parse, eval_llama_cmpl_schema: the task's parser params), then
// task_result_state::update_chat_msg on the whole text (non-streamed) and per piece (streamed; then "" as final),
// printing the message and the stream deltas as the server writes them. CHAT_TEMPLATE, BOS_TOKEN and EOS_TOKEN are
// what `llama-server -m model.gguf` gives common_chat_templates_init from the GGUF (its embedded template, its
// vocabulary's BOS/EOS), as the replay used them (TOOL_PARSER says where each came from), inlined.
// Needs only llama.cpp's source at the tag, built as usual (cmake -B build && cmake --build build --target
// llama-server). Build and run from the checkout's root (LLAMACPP_REPRO: this file):
//   c++ -std=c++17 -O1 -DLLAMA_SHARED -DGGML_SHARED -DGGML_BACKEND_DL -DLLAMA_SUBPROCESS -Itools/server -Itools/mtmd \
//     -I. -Icommon -Ivendor -Iinclude -Iggml/include "$LLAMACPP_REPRO" build/tools/server/libserver-context.a \
//     -Lbuild/bin -lllama-common build/common/libllama-common-base.a -lmtmd -lllama -lggml -lggml-base \
//     -Wl,-rpath,"$PWD/build/bin" -o llamacpp-repro && ./llamacpp-repro
#include "arg.h"
#include "chat.h"
#include "common.h"
#include "server-chat.h"
#include "server-common.h"
#include "server-schema.h"
#include "server-task.h"

#include <iostream>
#include <string>
#include <vector>

// @constants

// Token-level fields of the server's request schema: they need a vocabulary and only steer sampling.
static const char * const TOKEN_FIELDS[] = {
    "preserved_tokens", "grammar_triggers", "reasoning_budget_start_tag", "reasoning_budget_end_tags",
    "reasoning_budget_end_tag", "reasoning_budget_message", "logit_bias", "ignore_eos",
};

// The server's chat settings for the template, as load_model builds them (thinking on where it supports it).
static server_chat_params chat_settings(const common_params & base) {
    auto tmpls = common_chat_templates_init(/* model= */ nullptr, CHAT_TEMPLATE, BOS_TOKEN, EOS_TOKEN);
    const bool thinking = base.use_jinja && base.enable_reasoning != 0
        && common_chat_templates_support_enable_thinking(tmpls.get());
    return server_chat_params{base.use_jinja, base.prefill_assistant, base.reasoning_format,
                              base.default_template_kwargs, std::move(tmpls), false, false, false, thinking,
                              base.sampling.reasoning_budget_tokens, base.sampling.reasoning_budget_message,
                              base.media_path, base.force_pure_content_parser};
}

// The task's parser params for the chat request with the tools (streamed or not, as the server derives them).
static common_chat_parser_params parser_params(const common_params & base, server_chat_params & chat,
                                               bool stream) {
    json user = json::object();
    user["role"]    = "user";
    user["content"] = "repro";
    json body = json::object();
    body["messages"] = json::array();
    body["messages"].push_back(user);
    body["tool_choice"] = "auto";
    body["stream"]      = stream;
    if (!TOOLS.empty()) {
        body["tools"] = TOOLS;
    }
    if (CHAT_TEMPLATE_KWARGS.is_object() && !CHAT_TEMPLATE_KWARGS.empty()) {
        body["chat_template_kwargs"] = CHAT_TEMPLATE_KWARGS;
    }
    std::vector<raw_buffer> files;
    json llama_params = oaicompat_chat_params_parse(body, chat, files);
    for (const char * field : TOKEN_FIELDS) {
        llama_params.erase(field);
    }
    return server_schema::eval_llama_cmpl_schema(nullptr, base, {}, llama_params).chat_parser_params;
}

int main() {
    common_init();
    common_params base;
    std::vector<std::string> args = {"llama-server", "--jinja"};
    std::vector<char *> argv;
    for (auto & arg : args) {
        argv.push_back(arg.data());
    }
    if (!common_params_parse(static_cast<int>(argv.size()), argv.data(), base, LLAMA_EXAMPLE_SERVER)) {
        return 2;
    }
    server_chat_params chat = chat_settings(base);

    // Non-streamed: the whole text, parsed once as final (a parse that throws is the server's HTTP 500)
    try {
        task_result_state whole(parser_params(base, chat, false));
        std::vector<common_chat_msg_diff> diffs;
        const std::string message = whole.update_chat_msg(TEXT, false, diffs).to_json_oaicompat().dump_safe();
        std::cout << "non-streamed message: " << message << std::endl;
    } catch (const std::exception & e) {
        std::cout << "non-streamed answer: HTTP 500 " << e.what() << std::endl;
    }

    // Streamed: each piece parsed as partial, then the final result (no text of its own in stream mode)
    if (!PIECES.is_null()) {
        std::cout << "streamed deltas:" << std::endl;
        try {
            task_result_state state(parser_params(base, chat, true));
            auto update = [&](const std::string & text, bool is_partial) {
                std::vector<common_chat_msg_diff> diffs;
                state.update_chat_msg(text, is_partial, diffs);
                for (const auto & diff : diffs) {
                    std::cout << server_chat_msg_diff_to_json_oaicompat(diff).dump_safe() << std::endl;
                }
            };
            for (const auto & piece : PIECES) {
                update(piece.at(0).get<std::string>(), true);
            }
            update("", false);
        } catch (const std::exception & e) {
            std::cout << "streamed answer: HTTP 500 " << e.what() << std::endl;
        }
    }
    return 0;
}
