// Submits a checkpoint directory to the grading API and prints the JSON answer:
//   node submit.mjs <model_path>
const [modelPath] = process.argv.slice(2);
const res = await fetch(`${process.env.GRADING_SERVER_URL}/submit`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model_path: modelPath }),
});
const body = await res.text();
console.log(`submit ${modelPath}: HTTP ${res.status} ${body}`);
