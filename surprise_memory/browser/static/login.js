// The memory browser's sign-in form: the server redirects back here with ?failed after a
// wrong token; say so. (The form itself works without this script.)
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  if (new URLSearchParams(window.location.search).has("failed")) {
    document.getElementById("sign-in-msg").hidden = false;
  }
});
