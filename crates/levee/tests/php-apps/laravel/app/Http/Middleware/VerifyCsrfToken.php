<?php

namespace App\Http\Middleware;

use Illuminate\Foundation\Http\Middleware\VerifyCsrfToken as Middleware;

class VerifyCsrfToken extends Middleware
{
    /** The test posts without a form of the app's: an API-like exception. */
    protected $except = ['echo/*', 'upload'];
}
