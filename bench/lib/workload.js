'use strict';
/** What `npm run bench` and `npm run bench:ab` send and how their gateway is configured. */

const KEY = 'gw-bench-key';

/** The chat body's question as a Responses API request (instructions + input), for the responses section. */
const responsesBody = (model) =>
  JSON.stringify({
    model,
    instructions: 'You are a helpful assistant. Answer briefly and precisely.',
    input: 'Write two sentences about the sea, one about its colour and one about its sound.',
    max_output_tokens: 200,
    temperature: 0.7,
  });

const chatBody = (model, extra = {}) =>
  JSON.stringify({
    model,
    messages: [
      { role: 'system', content: 'You are a helpful assistant. Answer briefly and precisely.' },
      { role: 'user', content: 'Write two sentences about the sea, one about its colour and one about its sound.' },
    ],
    max_tokens: 200,
    temperature: 0.7,
    ...extra,
  });

function gatewayYaml(fakeUrl) {
  return [
    '# Written by the bench: one OpenAI-compatible provider pointing at the bench fake.',
    'providers:',
    `  fake: { family: openai, base_url: "${fakeUrl}/v1", api_key: "x" }`,
    'models:',
    '  bench:       { provider: fake, upstream: bench-model, cost: { input_per_mtok: 0.15, output_per_mtok: 0.6 } }',
    '  bench-delay: { provider: fake, upstream: bench-delay, cost: { input_per_mtok: 0.15, output_per_mtok: 0.6 } }',
    '  bench-slow:  { provider: fake, upstream: bench-slow, cost: { input_per_mtok: 0.15, output_per_mtok: 0.6 } }',
    'organizations:',
    `  bench: { plan: pro, api_keys: [ { id: bench, key: "${KEY}" } ] }`,
    'limits: { requests_per_minute_per_key: 100000000 }',
    '',
  ].join('\n');
}

module.exports = { KEY, chatBody, responsesBody, gatewayYaml };
