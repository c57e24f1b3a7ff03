/* triage console: keyboard shortcuts and queue row selection.
 * Progressive enhancement only: every action is a plain link or form button without it.
 * An element with data-key="x" is activated by the key x: buttons and links are clicked
 * (a decision button submits the form), fields are focused. */
(function () {
  "use strict";

  var submitting = false;
  var TEXT_INPUTS = /^(text|password|search|email|number|url|tel)$/;

  function typing(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && TEXT_INPUTS.test(el.type || "text");
  }

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue-list tbody tr.row"));
  }

  function selectedIndex(list) {
    for (var i = 0; i < list.length; i++) {
      if (list[i].classList.contains("selected")) return i;
    }
    return -1;
  }

  function select(list, index, focus) {
    if (!list.length) return;
    index = Math.max(0, Math.min(list.length - 1, index));
    list.forEach(function (row, i) {
      row.classList.toggle("selected", i === index);
    });
    var link = list[index].querySelector("a.open");
    if (focus && link) link.focus();
  }

  function activate(el) {
    if (el.disabled) return;
    if (el.tagName === "BUTTON" || el.tagName === "A") {
      if (el.tagName === "BUTTON" && el.type === "submit") {
        if (submitting) return;  // one keystroke, one decision: ignore repeats until the next page
        submitting = true;
      }
      el.click();
      return;
    }
    el.focus();
  }

  function help() {
    return document.getElementById("shortcuts");
  }

  document.addEventListener("submit", function () {
    submitting = true;
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.altKey || ev.metaKey || ev.isComposing) return;
    var target = ev.target;
    if (ev.key === "Escape") {
      if (typing(target)) target.blur();
      if (help()) help().open = false;
      return;
    }
    if (ev.ctrlKey && ev.key === "Enter") {
      var save = document.getElementById("save-edit");
      if (save) {
        ev.preventDefault();
        activate(save);
      }
      return;
    }
    if (ev.ctrlKey || typing(target)) return;
    if (ev.key === "Enter" && target.tagName === "INPUT" && target.form) {
      ev.preventDefault();  // Enter on a checkbox would submit the form: never a decision by accident
      return;
    }
    if (ev.key === "?") {
      if (help()) help().open = !help().open;
      ev.preventDefault();
      return;
    }
    var list = rows();
    if (list.length) {
      var at = selectedIndex(list);
      if (ev.key === "j" || ev.key === "k") {
        select(list, at < 0 ? 0 : at + (ev.key === "j" ? 1 : -1), true);
        ev.preventDefault();
        return;
      }
      if ((ev.key === "o" || ev.key === "Enter") && target.tagName !== "A" &&
          target.tagName !== "BUTTON" && at >= 0) {
        window.location.assign(list[at].getAttribute("data-href"));
        ev.preventDefault();
        return;
      }
    }
    if (ev.key.length !== 1) return;
    var el = document.querySelector('[data-key="' + CSS.escape(ev.key) + '"]');
    if (el) {
      ev.preventDefault();
      activate(el);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var list = rows();
    select(list, 0, false);
    list.forEach(function (row) {
      row.addEventListener("click", function (ev) {
        if (ev.target.closest("a")) return;
        window.location.assign(row.getAttribute("data-href"));
      });
    });
  });
})();
