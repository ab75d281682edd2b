/* Figures that read on any screen. Jupyter Book adds every .js file of
 * _static/ to every page; _static/layout.css has the matching rules,
 * tests/e2e/test_browser.py (test_page_reads_on_laptop_and_phone) measures.
 * A figure is an image in the article outside the kernel-free explorers.
 *
 * 1. Its text never shrinks under 9 CSS px. Each figure says the size of its
 *    smallest text: a PNG in a tEXt chunk (scripts/figure_text.py, written
 *    at `make execute`), a diagram's SVG in its description
 *    (selfattention_book.diagrams.to_svg). Where the column is too narrow to
 *    show that text at 9 px (a phone), the figure keeps the width that does
 *    and its box scrolls sideways, with the scroll shadow of layout.js.
 * 2. It opens full size on a tap, a click, or Enter or Space: it sits in a
 *    button that opens a dialog with the figure at its own size (panned
 *    when wider than the screen). Escape, the Close button or a tap beside
 *    the figure closes it, and focus returns to the figure. */
(function () {
  "use strict";
  const MIN_TEXT_PX = 9;
  const PNG_KEY = "selfattention:smallest-text-px";

  function figures() {
    return Array.from(document.querySelectorAll("article img")).filter(
      img => !img.closest("[data-testid], dialog, .sa-zoom"));
  }

  // The value of the PNG's tEXt chunk `key`, or null.
  function pngText(bytes, key) {
    const view = new DataView(bytes.buffer);
    const text = (a, b) => String.fromCharCode.apply(null, bytes.slice(a, b));
    for (let at = 8; at + 8 <= bytes.length;) {
      const length = view.getUint32(at);
      const type = text(at + 4, at + 8);
      if (type === "tEXt") {
        const body = text(at + 8, at + 8 + length);
        const nul = body.indexOf("\0");
        if (body.slice(0, nul) === key) return body.slice(nul + 1);
      }
      if (type === "IDAT" || type === "IEND") break;
      at += 12 + length;
    }
    return null;
  }

  // CSS px of the figure's smallest text per CSS px of its drawn width, or
  // null (no text, or the figure does not say).
  async function textPerWidth(img) {
    const src = img.currentSrc || img.src;
    const response = await fetch(src);
    if (/\.svg($|[?#])/.test(src)) {
      const said = (await response.text()).match(
        /smallest text ([\d.]+) pt when shown (\d+) CSS px wide/);
      return said ? (+said[1]) * 96 / 72 / (+said[2]) : null;
    }
    const said = pngText(new Uint8Array(await response.arrayBuffer()),
                         PNG_KEY);
    if (said === null || said === "none" || !img.naturalWidth) return null;
    return (+said) / img.naturalWidth;
  }

  async function keepTextReadable(img) {
    try {
      if (!img.complete) {
        await new Promise(done => img.addEventListener("load", done,
                                                       {once: true}));
      }
      const ratio = await textPerWidth(img);
      if (ratio) {
        img.style.minWidth = Math.ceil(MIN_TEXT_PX / ratio) + "px";
      }
    } catch {
      /* a figure that cannot be read back keeps its size */
    }
  }

  // The width the figure was made for: myst-nb writes it for a figure
  // stored at twice its pixels; else the picture's own.
  function ownWidth(img) {
    const styled = parseFloat(img.style.width);
    const attribute = parseFloat(img.getAttribute("width"));
    return styled || attribute || img.naturalWidth || img.width;
  }

  function openFull(img, opener) {
    const dialog = document.createElement("dialog");
    dialog.className = "sa-zoom-dialog";
    dialog.setAttribute("aria-label", "Figure at full size");
    const close = document.createElement("button");
    close.type = "button";
    close.className = "sa-zoom-close";
    close.textContent = "Close";
    close.addEventListener("click", () => dialog.close());
    const frame = document.createElement("div");
    frame.className = "sa-zoom-frame";
    const big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    big.style.width = Math.max(ownWidth(img), img.width) + "px";
    frame.append(big);
    dialog.append(close, frame);
    dialog.addEventListener("click", event => {
      if (event.target === dialog || event.target === frame) dialog.close();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      opener.focus();
    });
    document.body.append(dialog);
    dialog.showModal();
    close.focus();
  }

  function makeOpenable(img) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sa-zoom";
    button.setAttribute("aria-haspopup", "dialog");
    button.title = "Show the figure at full size";
    img.replaceWith(button);
    button.append(img);
    button.addEventListener("click", () => openFull(img, button));
  }

  function start() {
    for (const img of figures()) {
      makeOpenable(img);
      keepTextReadable(img);
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
