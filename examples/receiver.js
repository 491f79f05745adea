// A webhook receiver that verifies both signatures of every delivery: `npm install standardwebhooks`, then
// `WEBHOOK_SECRET=whsec_... node receiver.js` and register http://127.0.0.1:9000/hook.
const crypto = require("node:crypto");
const http = require("node:http");
const { Webhook } = require("standardwebhooks");

const SECRET = process.env.WEBHOOK_SECRET; // whsec_..., from registering the endpoint
const webhook = new Webhook(SECRET);

// The older scheme beside Standard Webhooks: hex(HMAC-SHA256(secret as UTF-8, body)).
function taskQueueSignatureOk(headers, body) {
  const expected = crypto.createHmac("sha256", SECRET).update(body).digest("hex");
  const given = String(headers["x-task-queue-signature"] || "");
  return given.length === expected.length && crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

http
  .createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      let event;
      let ok;
      try {
        event = webhook.verify(body, request.headers); // webhook-id, -timestamp, -signature; 5-minute tolerance
        ok = taskQueueSignatureOk(request.headers, body);
      } catch (error) {
        event = JSON.parse(body);
        ok = false;
      }
      console.log(ok ? "verified" : "REJECTED", request.headers["webhook-id"], event.type);
      response.writeHead(ok ? 200 : 400).end();
    });
  })
  .listen(Number(process.env.PORT || 9000), "127.0.0.1");
