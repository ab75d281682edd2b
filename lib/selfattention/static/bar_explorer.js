/* Script of selfattention.interactive.bar_explorer: buttons switch
 * between precomputed bar charts. Runs inside
 * (function() { var D, root, cap; ... })(), as patch_explorer.js.
 */
  var cv = root.querySelector("canvas"), cx = cv.getContext("2d");
  var btns = root.querySelectorAll("button[data-choice]");
  var k = D.choice, pad = D.pad, top = D.top, foot = D.foot;
  function draw() {
    cx.fillStyle = "#fff"; cx.fillRect(0, 0, cv.width, cv.height);
    cx.font = "12px sans-serif"; cx.textAlign = "center";
    var parts = [];
    D.series.forEach(function(name, s) {
      var v = D.values[k][s], x0 = s * D.w + pad, pw = D.w - pad - 8;
      var ph = D.h - top - foot, bw = pw / v.length;
      cx.fillStyle = "#1a1a1a"; cx.fillText(name, x0 + pw / 2, 14);
      cx.strokeStyle = "#6e6e6e"; cx.beginPath();
      cx.moveTo(x0, top); cx.lineTo(x0, top + ph); cx.lineTo(x0 + pw, top + ph);
      cx.stroke();
      cx.textAlign = "right"; cx.fillText("0", x0 - 3, top + ph + 4);
      cx.fillText(D.ymax.toFixed(2), x0 - 3, top + 8); cx.textAlign = "center";
      cx.fillStyle = "rgb(" + D.colour.join(",") + ")";
      var best = 0;
      v.forEach(function(y, j) {
        var hh = Math.min(1, y / D.ymax) * ph;
        cx.fillRect(x0 + j * bw + 1, top + ph - hh, Math.max(1, bw - 2), hh);
        if (y > v[best]) best = j;
      });
      cx.fillStyle = "#1a1a1a"; cx.font = "11px sans-serif";
      var every = bw >= 14 ? 1 : 5;          // numbers that fit under bars
      for (var j = 0; j < v.length; j += every) {
        cx.fillText(String(j), x0 + (j + 0.5) * bw, top + ph + 14);
      }
      cx.font = "12px sans-serif";
      cx.fillText(D.xlabel, x0 + pw / 2, D.h - 4);
      if (D.ylabel) {
        cx.save(); cx.translate(s * D.w + 12, top + ph / 2);
        cx.rotate(-Math.PI / 2); cx.fillText(D.ylabel, 0, 0); cx.restore();
      }
      parts.push(name + " largest " + v[best].toFixed(4) +
                 (D.xlabel ? " at " + D.xlabel + " " : " at ") + best);
    });
    btns.forEach(function(b, j) {
      b.setAttribute("aria-pressed", j === k ? "true" : "false"); });
    cap.textContent = D.choices[k] + ": " + parts.join("; ");
  }
  btns.forEach(function(b, j) {
    b.addEventListener("click", function() { k = j; draw(); }); });
  draw();
