// live.js: the job page's output and state as they come, over the
// console's own WebSocket (/ui/jobs/{id}/follow, which relays the node's
// job_follow). No framework; the page works without it.
(function () {
  "use strict";
  var log = document.getElementById("log");
  var status = document.getElementById("live-status");
  if (!log || !log.dataset.follow || !window.WebSocket) { return; }
  var maxChars = 256 * 1024; // what the page keeps; older output is dropped from the top
  var stateEl = document.querySelector("#job .state");
  function say(s) { if (status) { status.textContent = s; } }
  function append(s) {
    var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.appendChild(document.createTextNode(s));
    if (log.textContent.length > maxChars) {
      log.textContent = log.textContent.slice(-maxChars);
    }
    if (atBottom) { log.scrollTop = log.scrollHeight; }
  }
  var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + log.dataset.follow;
  var ws = new WebSocket(url);
  var ended = false;
  ws.onopen = function () { say("Live: new output appears below as the job prints it."); };
  ws.onmessage = function (m) {
    var ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    switch (ev.type) {
    case "log":
      append(ev.log || "");
      break;
    case "state":
      if (stateEl) { stateEl.textContent = ev.state + (ev.note ? ": " + ev.note : ""); }
      append("[state] " + ev.state + (ev.note ? ": " + ev.note : "") + "\n");
      break;
    case "dropped":
      ended = true;
      say("Live output stopped: " + (ev.note || "the page fell behind") + "; reload for the latest.");
      break;
    case "error":
      ended = true;
      say("Cannot follow this job: " + (ev.note || "unknown error"));
      break;
    case "end":
      ended = true;
      say("The job has ended" + (ev.state ? " (" + ev.state + ")" : "") + "; this is all its output.");
      break;
    }
  };
  ws.onclose = function () { if (!ended) { say("Live output disconnected; reload the page to resume."); } };
})();
